/* DLPack: a torch tensor read through its C exchange API, and any __dlpack__ producer's capsule. */
#include "aot_py_internal.h"

#include <inttypes.h>

/* DLPack's C exchange API of torch.Tensor, where torch has one: found by aot_py_args.c once torch is
 * imported, kept here beside its only reader, so that arguments call DLPack and never the reverse. */
const struct dl_exchange_api *bind_torch_exchange;

/* The exchange API on `type`, version 1.2 or a later 1.x, or NULL. */
const struct dl_exchange_api *bind_exchange_api(PyObject *type) {
  PyObject *capsule = PyObject_GetAttrString(type, "__dlpack_c_exchange_api__");
  const dl_api_header *h = capsule ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api") : NULL;
  PyErr_Clear();
  while (h != NULL && !(h->version.major == 1 && h->version.minor >= 2)) h = h->prev;
  const struct dl_exchange_api *api = (const struct dl_exchange_api *)h;
  if (api != NULL && (api->dltensor_from_py_object == NULL || api->current_work_stream == NULL)) api = NULL;
  if (api == NULL) Py_XDECREF(capsule); /* else kept: the table lives as long as the capsule's owner */
  return api;
}

/* Whether a DLTensor is contiguous as torch's is_contiguous() has it (size-1 dimensions take any stride);
 * *numel its element count, or -1 when that overflows. */
static int dl_contiguous(const dl_tensor *dl, int64_t *numel) {
  int64_t n = 1; /* the elements of the dimensions after d: what a contiguous stride of d is */
  int contiguous = 1, wraps = 0;
  for (int d = dl->ndim - 1; d >= 0; d--) {
    if (dl->shape[d] != 1 && dl->strides != NULL && dl->strides[d] != n) contiguous = 0;
    wraps += __builtin_mul_overflow(n, dl->shape[d], &n);
  }
  *numel = wraps ? -1 : n;
  return contiguous || n == 0;
}

/* The dtype code of a DLTensor's element type, or -1 when no kernel here takes it. */
static int dl_dtype(const dl_tensor *dl) {
  int code = dl->dtype.code << 8 | dl->dtype.bits;
  for (int d = 0; d < aot_num_dtypes; d++)
    if (aot_dtype_dlpack[d] == code) return d;
  return -1;
}

/* A DLTensor's address: its data pointer plus its byte offset, both the producer's, checked. */
static int dl_address(const dl_tensor *dl, uint64_t *ptr, const char *arg, aot_error *err) {
  if (__builtin_add_overflow((uint64_t)(uintptr_t)dl->data, dl->byte_offset, ptr))
    return aot_fail(err, AOT_E_VALUE, "argument %s: its DLPack data pointer 0x%" PRIx64 " plus byte offset %" PRIu64
                    " is past 64-bit addresses", arg, (uint64_t)(uintptr_t)dl->data, dl->byte_offset);
  return 0;
}

/* A DLTensor's shape and strides (at most AOT_MAX_DIMS dimensions; no strides: compact row-major). */
static void dl_shape(const dl_tensor *dl, aot_tensor *t) {
  int64_t expect = 1;
  t->ndim = dl->ndim;
  for (int d = dl->ndim - 1; d >= 0; d--) {
    t->shape[d] = dl->shape[d];
    t->strides[d] = dl->strides != NULL ? dl->strides[d] : expect;
    expect = aot_sat_mul(expect, dl->shape[d]);
  }
}

/* A torch tensor read through DLPack's C exchange API: pointer, device, dtype, and as much of its shape
 * as the kernel reads (aot_shape_use), in one call, as the method path would read them. Returns its
 * device, or NOT_DESCRIBED where that path should read it instead and word what is wrong (off CUDA, a
 * dtype no kernel takes, more dimensions than the runtime holds, an export torch refuses); -1 and err for
 * an address past 64 bits. */
int bind_exchange_arg(PyObject *obj, aot_tensor *t, int use, const char *arg, aot_error *err) {
  dl_tensor dl;
  if (bind_torch_exchange->dltensor_from_py_object(obj, &dl) != 0) {
    PyErr_Clear();
    return NOT_DESCRIBED;
  }
  int dtype = dl_dtype(&dl);
  if (dl.device.type != DL_CUDA || dl.dtype.lanes != 1 || dtype < 0 || dl.ndim < 0) return NOT_DESCRIBED;
  if (use != AOT_SHAPE_NONE && dl.ndim <= AOT_MAX_DIMS) {
    dl_shape(&dl, t);
  } else if (use != AOT_SHAPE_NONE) { /* more dimensions: only a contiguous tensor's extent fits */
    int64_t numel;
    if (use != AOT_SHAPE_SPAN || !dl_contiguous(&dl, &numel) || numel < 0) return NOT_DESCRIBED;
    t->ndim = 1, t->shape[0] = numel, t->strides[0] = 1;
  }
  if (dl_address(&dl, &t->ptr, arg, err) < 0) return -1;
  t->dtype = dtype;
  return dl.device.id;
}

/* A DLPack producer (JAX, CuPy, ...): read its DLTensor, then let the capsule go unconsumed (its
 * destructor releases it; the caller's object keeps the memory alive, as for any launch). */
int bind_dlpack_arg(PyObject *obj, aot_tensor *t, int planned, const char *arg, aot_error *err) {
  PyObject *capsule = PyObject_CallMethod(obj, "__dlpack__", NULL);
  if (capsule == NULL) return -1;
  const dl_tensor *dl = PyCapsule_GetPointer(capsule, "dltensor"); /* DLManagedTensor starts with it */
  int device = -1;
  if (dl == NULL) {
    PyErr_Clear();
    aot_fail(err, AOT_E_TYPE, "argument %s: __dlpack__ did not return a DLPack capsule", arg);
  } else if (dl->device.type != DL_CUDA && dl->device.type != DL_CUDA_MANAGED && !planned) {
    aot_fail(err, AOT_E_VALUE, "argument %s is not in CUDA memory (DLPack device type %d); select(..., "
             "target='sm_90a') says which variant a GPU would run", arg, dl->device.type);
  } else if (dl->ndim < 0 || dl->ndim > AOT_MAX_DIMS || dl->dtype.lanes != 1) {
    aot_fail(err, AOT_E_VALUE, "argument %s: %d dimensions or vector lanes are not supported", arg, dl->ndim);
  } else {
    int dtype = dl_dtype(dl);
    if (dtype < 0) {
      aot_fail(err, AOT_E_TYPE, "argument %s has DLPack dtype (code %d, %d bits), which no kernel here takes", arg,
               dl->dtype.code, dl->dtype.bits);
    } else if (dl_address(dl, &t->ptr, arg, err) == 0) {
      t->dtype = dtype;
      dl_shape(dl, t);
      device = planned ? -2 : dl->device.id; /* planned: host memory (numpy) describes the call too */
    }
  }
  Py_DECREF(capsule);
  return device;
}
