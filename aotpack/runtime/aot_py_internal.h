/* The binding's private header: what its files share (DLPack's types, the module's exceptions, the torch
 * state) and the functions one file gives another, prefixed bind_. Not included by generated code, which
 * sees aot_python.h only; nothing here is exported (the extension is compiled with hidden visibility). */
#ifndef AOT_PY_INTERNAL_H
#define AOT_PY_INTERNAL_H

#include "aot_python.h"

/* DLPack's DLTensor (dlpack.h, stable since DLPack 0.x). */
typedef struct {
  void *data;
  struct {
    int32_t type, id;
  } device;
  int32_t ndim;
  struct {
    uint8_t code, bits;
    uint16_t lanes;
  } dtype;
  int64_t *shape, *strides;
  uint64_t byte_offset;
} dl_tensor;
enum { DL_CUDA = 2, DL_CUDA_MANAGED = 13 };

/* DLPack's C exchange API (dlpack.h 1.3: `__dlpack_c_exchange_api__` on the tensor type, a capsule named
 * "dlpack_exchange_api"; torch.Tensor has it from torch 2.10, and the torch-c-dlpack-ext package puts it on
 * older ones): fills a DLTensor from a tensor and gives the framework's current stream, both plain C calls
 * that make no Python object. The table has this layout since version 1.2; only the fields up to the ones
 * read here are declared (later minor versions append). */
typedef struct dl_api_header {
  struct {
    uint32_t major, minor;
  } version;
  struct dl_api_header *prev; /* an older version of the API, or NULL */
} dl_api_header;
struct dl_exchange_api {
  dl_api_header header;
  void *managed_tensor_allocator, *managed_tensor_from_py_object, *managed_tensor_to_py_object;
  int (*dltensor_from_py_object)(void *obj, dl_tensor *out); /* NULL where the producer lacks it */
  int (*current_work_stream)(int device_type, int32_t device_id, void **stream);
};

/* ---------------------------------------------------------------- errors and text (aot_py_errors.c)
 * The base of the binding; each file below calls only those above it (errors, then arguments, then the
 * calls in aot_python.c and the runner, then aot_py_module.c), so no two call each other. */

extern PyObject *bind_missing_error; /* <package>.MissingVariant */
extern PyObject *bind_miss_warning;  /* the category class misses are warned with (opt-in: _warn_misses), or NULL */
const char *bind_text_of(PyObject *obj, char *buf, size_t size);
const char *bind_type_name(PyObject *obj, char *buf, size_t size);
/* <package>.CudaError and <package>.MissingVariant, made and added to the module; 0, or -1 with an exception. */
int bind_add_errors(PyObject *module, const char *package);
PyObject *bind_raise(const aot_error *err); /* err as the Python exception of its status; returns NULL */

/* ---------------------------------------------------------------- arguments (aot_py_args.c, aot_py_dlpack.c) */

extern const struct dl_exchange_api *bind_torch_exchange; /* torch.Tensor's, where torch has one (aot_py_dlpack.c) */
extern PyObject *bind_small_ints[AOT_MAX_DEVICES]; /* device ordinals; 4 and 3: Triton's num_warps and num_stages */
int bind_args_init(void); /* the interned names and small ints the argument readers use */
/* select(target=..., sms=...): a GPU that need not be here (capability 0: none named, the arguments' device) */
typedef struct {
  int capability, sms;
} bind_plan;
int bind_planned(const aot_kernel *k, PyObject *target, PyObject *sms, bind_plan *plan, aot_error *err);
int bind_parse(const aot_kernel *k, PyObject *const *args, Py_ssize_t nargs, PyObject *kwargs, aot_call *call,
               uint64_t *stream, int *forced, bind_plan *plan);
/* Up to `max` integers of a sequence into out; their count, or -1 and err. */
int bind_int_tuple(PyObject *seq, int64_t *out, int max, const char *arg, const char *what, aot_error *err);
const struct dl_exchange_api *bind_exchange_api(PyObject *type);
enum { NOT_DESCRIBED = -3 }; /* bind_exchange_arg: the tensor is left to torch's methods */
int bind_exchange_arg(PyObject *obj, aot_tensor *t, int use, const char *arg, aot_error *err);
int bind_dlpack_arg(PyObject *obj, aot_tensor *t, int planned, const char *arg, aot_error *err);

#endif
