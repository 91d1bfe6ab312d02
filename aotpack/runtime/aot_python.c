/* See aot_python.h. Torch is never imported here: when the caller has imported it, its tensor type,
 * dtypes and current-stream getter are looked up once and used as a fast path. */
#include "aot_python.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static PyObject *cuda_error;   /* <package>.CudaError */
static PyObject *missing_error; /* <package>.MissingVariant */
static PyObject *miss_warning;  /* the category class misses are warned with (opt-in: _warn_misses), or NULL */
_Static_assert(sizeof(unsigned long) == 8, "pointers are read as unsigned long (LP64)");
static PyObject *torch_tensor; /* torch.Tensor, once torch is imported */
static PyObject *torch_dtypes[64];
static PyObject *torch_raw_stream; /* torch._C._cuda_getCurrentRawStream */
static const struct dl_exchange_api *torch_exchange; /* DLPack's C exchange API of torch.Tensor, where torch has one */
static PyObject *torch_parameter;                    /* torch.nn.Parameter: a tensor that overrides none of its reads */
enum { GET_DEVICE, DATA_PTR, STRIDE, IS_CONTIGUOUS, NUMEL, TENSOR_METHODS };
static PyObject *tensor_methods[TENSOR_METHODS]; /* torch.Tensor.get_device, .data_ptr, ... (the enum's order) */
static PyObject *s_data_ptr, *s_get_device, *s_dtype, *s_shape, *s_stride, *s_is_contiguous, *s_numel, *s_cai,
    *s_cuda_stream, *s_torch, *s_data, *s_typestr, *s_strides;
static PyObject *small_ints[AOT_MAX_DEVICES]; /* device ordinals; 4 and 3: Triton's num_warps and num_stages */

/* str(obj) into buf (the limited API of 3.9 has no borrowed UTF-8 view). */
static const char *text_of(PyObject *obj, char *buf, size_t size) {
  PyObject *str = obj ? PyObject_Str(obj) : NULL;
  PyObject *bytes = str ? PyUnicode_AsUTF8String(str) : NULL;
  const char *s = bytes ? PyBytes_AsString(bytes) : NULL;
  snprintf(buf, size, "%s", s ? s : "?");
  Py_XDECREF(bytes);
  Py_XDECREF(str);
  PyErr_Clear();
  return buf;
}

static const char *type_name(PyObject *obj, char *buf, size_t size) {
  PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__");
  text_of(name, buf, size);
  Py_XDECREF(name);
  return buf;
}

static int add_kernel_type(PyObject *module, const char *package);

int aot_py_init(PyObject *module) {
  PyObject *name = PyObject_GetAttrString(module, "__name__");
  if (name == NULL) return -1;
  char qual[256];
  text_of(name, qual, sizeof qual - 16);
  Py_DECREF(name);
  char *native = strstr(qual, "._native"); /* the error belongs to the package, not its extension */
  if (native != NULL) *native = '\0';
  strcat(qual, ".CudaError");
  cuda_error = PyErr_NewExceptionWithDoc(qual, "A CUDA driver error, or no usable GPU or driver.", PyExc_RuntimeError,
                                         NULL);
  if (cuda_error == NULL) return -1;
  Py_INCREF(cuda_error);
  if (PyModule_AddObject(module, "CudaError", cuda_error) < 0) return -1;
  strcpy(strrchr(qual, '.'), ".MissingVariant");
  missing_error = PyErr_NewExceptionWithDoc(
      qual, "A call in Triton's launch syntax that no built variant matches exactly (its config and class).",
      PyExc_LookupError, NULL);
  if (missing_error == NULL) return -1;
  Py_INCREF(missing_error);
  if (PyModule_AddObject(module, "MissingVariant", missing_error) < 0) return -1;
  *strrchr(qual, '.') = '\0';
  if (add_kernel_type(module, qual) < 0) return -1;
#define AOT_INTERN(var, text) \
  if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
  AOT_INTERN(s_data_ptr, "data_ptr");
  AOT_INTERN(s_get_device, "get_device");
  AOT_INTERN(s_dtype, "dtype");
  AOT_INTERN(s_shape, "shape");
  AOT_INTERN(s_stride, "stride");
  AOT_INTERN(s_is_contiguous, "is_contiguous");
  AOT_INTERN(s_numel, "numel");
  AOT_INTERN(s_cai, "__cuda_array_interface__");
  AOT_INTERN(s_cuda_stream, "cuda_stream");
  AOT_INTERN(s_torch, "torch");
  AOT_INTERN(s_data, "data");
  AOT_INTERN(s_typestr, "typestr");
  AOT_INTERN(s_strides, "strides");
#undef AOT_INTERN
  for (int i = 0; i < AOT_MAX_DEVICES; i++)
    if ((small_ints[i] = PyLong_FromLong(i)) == NULL) return -1;
  return 0;
}

static PyObject *raise(const aot_error *err) {
  PyObject *type = err->status == AOT_E_TYPE      ? PyExc_TypeError
                   : err->status == AOT_E_VALUE   ? PyExc_ValueError
                   : err->status == AOT_E_MISSING ? missing_error
                                                  : cuda_error;
  PyErr_SetString(type, err->message);
  return NULL;
}

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

/* The exchange API on `type`, version 1.2 or a later 1.x, or NULL. */
static const struct dl_exchange_api *exchange_api(PyObject *type) {
  PyObject *capsule = PyObject_GetAttrString(type, "__dlpack_c_exchange_api__");
  const dl_api_header *h = capsule ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api") : NULL;
  PyErr_Clear();
  while (h != NULL && !(h->version.major == 1 && h->version.minor >= 2)) h = h->prev;
  const struct dl_exchange_api *api = (const struct dl_exchange_api *)h;
  if (api != NULL && (api->dltensor_from_py_object == NULL || api->current_work_stream == NULL)) api = NULL;
  if (api == NULL) Py_XDECREF(capsule); /* else kept: the table lives as long as the capsule's owner */
  return api;
}

/* torch.Tensor and torch's dtypes, looked up once the caller has imported torch. */
static int torch_ready(void) {
  if (torch_tensor != NULL) return 1;
  PyObject *modules = PyImport_GetModuleDict();
  PyObject *torch = modules ? PyDict_GetItem(modules, s_torch) : NULL; /* borrowed; an interned key: no hashing */
  if (torch == NULL) return 0;
  PyObject *tensor = PyObject_GetAttrString(torch, "Tensor");
  if (tensor == NULL) {
    PyErr_Clear();
    return 0;
  }
  PyObject *const names[TENSOR_METHODS] = {s_get_device, s_data_ptr, s_stride, s_is_contiguous, s_numel};
  for (int m = 0; m < TENSOR_METHODS; m++) {
    tensor_methods[m] = PyObject_GetAttr(tensor, names[m]);
    if (tensor_methods[m] == NULL) {
      while (m > 0) Py_CLEAR(tensor_methods[--m]);
      Py_DECREF(tensor);
      PyErr_Clear();
      return 0;
    }
  }
  for (int code = 0; code < aot_num_dtypes && code < 64; code++) {
    torch_dtypes[code] = PyObject_GetAttrString(torch, aot_dtype_torch_names[code]);
    if (torch_dtypes[code] == NULL) PyErr_Clear(); /* an older torch without this dtype */
  }
  PyObject *c = PyObject_GetAttrString(torch, "_C");
  torch_raw_stream = c ? PyObject_GetAttrString(c, "_cuda_getCurrentRawStream") : NULL;
  Py_XDECREF(c);
  if (torch_raw_stream == NULL) PyErr_Clear();
  torch_exchange = exchange_api(tensor);
  PyObject *nn = PyObject_GetAttrString(torch, "nn");
  torch_parameter = nn ? PyObject_GetAttrString(nn, "Parameter") : NULL;
  Py_XDECREF(nn);
  if (torch_parameter == NULL) PyErr_Clear();
  torch_tensor = tensor;
  return 1;
}

static int int_tuple(PyObject *seq, int64_t *out, int max, const char *arg, const char *what, aot_error *err) {
  /* torch.Size and stride() results are tuples already: read them without a copy */
  PyObject *tuple = PyTuple_Check(seq) ? (Py_INCREF(seq), seq) : PySequence_Tuple(seq);
  if (tuple == NULL) {
    PyErr_Clear();
    return aot_fail(err, AOT_E_TYPE, "argument %s: its %s is not a sequence", arg, what);
  }
  Py_ssize_t n = PyTuple_Size(tuple);
  if (n > max) {
    Py_DECREF(tuple);
    return aot_fail(err, AOT_E_VALUE, "argument %s has %zd dimensions; at most %d are supported", arg, n, max);
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    out[i] = PyLong_AsLongLong(PyTuple_GetItem(tuple, i));
    if (out[i] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      Py_DECREF(tuple);
      return aot_fail(err, AOT_E_TYPE, "argument %s: its %s holds a non-integer", arg, what);
    }
  }
  Py_DECREF(tuple);
  return (int)n;
}

/* A method of a tensor: torch.Tensor's own, looked up once, when the tensor is exactly a torch.Tensor
 * (a subclass may override it: then looked up on the tensor, as Python would). */
static PyObject *tensor_method(PyObject *obj, int method, PyObject *name) {
  return Py_TYPE(obj) == (PyTypeObject *)torch_tensor ? PyObject_CallFunctionObjArgs(tensor_methods[method], obj, NULL)
                                                      : PyObject_CallMethodObjArgs(obj, name, NULL);
}

/* An integer a method of the tensor returns; -1 with an exception set on failure. */
static long long tensor_int(PyObject *obj, int method, PyObject *name) {
  PyObject *value = tensor_method(obj, method, name);
  long long v = value ? PyLong_AsLongLong(value) : -1;
  Py_XDECREF(value);
  return v == -1 && PyErr_Occurred() ? -1 : v;
}

/* The shape the kernel reads of a torch tensor (aot_shape_use). For its extent alone, a contiguous
 * tensor is read as what it is to the kernel, numel() elements at stride 1: two cheap calls
 * instead of building the shape and stride tuples; any other tensor is read whole. */
static int torch_shape(PyObject *obj, aot_tensor *t, int use, const char *arg, aot_error *err) {
  if (use == AOT_SHAPE_NONE) return 0;
  if (use == AOT_SHAPE_SPAN) {
    PyObject *flag = tensor_method(obj, IS_CONTIGUOUS, s_is_contiguous);
    int contiguous = flag ? PyObject_IsTrue(flag) : -1;
    Py_XDECREF(flag);
    if (contiguous < 0) return -1;
    if (contiguous) {
      long long numel = tensor_int(obj, NUMEL, s_numel);
      if (numel < 0) return PyErr_Occurred() ? -1 : aot_fail(err, AOT_E_VALUE, "argument %s: numel() < 0", arg);
      t->ndim = 1, t->shape[0] = numel, t->strides[0] = 1;
      return 0;
    }
  }
  PyObject *shape = PyObject_GetAttr(obj, s_shape);
  PyObject *strides = shape ? tensor_method(obj, STRIDE, s_stride) : NULL;
  int ok = strides != NULL && (t->ndim = int_tuple(shape, t->shape, AOT_MAX_DIMS, arg, "shape", err)) >= 0 &&
           int_tuple(strides, t->strides, AOT_MAX_DIMS, arg, "stride", err) >= 0;
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return ok ? 0 : -1;
}

static int torch_arg(PyObject *obj, aot_tensor *t, int shape_use, const char *arg, aot_error *err) {
  long device = tensor_int(obj, GET_DEVICE, s_get_device);
  if (device == -1 && PyErr_Occurred()) return -1;
  if (device < 0) {
    char where[64];
    PyObject *dev_obj = PyObject_GetAttrString(obj, "device");
    text_of(dev_obj, where, sizeof where);
    Py_XDECREF(dev_obj);
    return aot_fail(err, AOT_E_VALUE, "argument %s is on %s; expected a CUDA tensor", arg, where);
  }
  PyObject *ptr = tensor_method(obj, DATA_PTR, s_data_ptr);
  if (ptr == NULL) return -1;
  t->ptr = PyLong_AsUnsignedLong(ptr); /* 64 bits (LP64); unlike ...LongLong, no byte-array detour */
  Py_DECREF(ptr);
  if (PyErr_Occurred()) return -1;
  PyObject *dtype = PyObject_GetAttr(obj, s_dtype);
  if (dtype == NULL) return -1;
  t->dtype = -2;
  for (int code = 0; code < aot_num_dtypes; code++)
    if (torch_dtypes[code] == dtype) t->dtype = code;
  if (t->dtype == -2) {
    char name[64];
    text_of(dtype, name, sizeof name);
    Py_DECREF(dtype);
    return aot_fail(err, AOT_E_TYPE, "argument %s has dtype %s, which no kernel here takes", arg, name);
  }
  Py_DECREF(dtype);
  return torch_shape(obj, t, shape_use, arg, err) < 0 ? -1 : (int)device;
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
enum { NOT_DESCRIBED = -3 };
static int exchange_arg(PyObject *obj, aot_tensor *t, int use, const char *arg, aot_error *err) {
  dl_tensor dl;
  if (torch_exchange->dltensor_from_py_object(obj, &dl) != 0) {
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

/* An object with __cuda_array_interface__ (CuPy, Numba, ...). Its device is the pointer's. */
static int cai_arg(PyObject *cai, aot_tensor *t, const char *arg, aot_error *err) {
  if (!PyDict_Check(cai)) return aot_fail(err, AOT_E_TYPE, "argument %s: __cuda_array_interface__ is not a dict", arg);
  PyObject *data = PyDict_GetItem(cai, s_data); /* borrowed; interned keys: no hashing per call */
  PyObject *typestr = PyDict_GetItem(cai, s_typestr);
  PyObject *shape = PyDict_GetItem(cai, s_shape);
  PyObject *strides = PyDict_GetItem(cai, s_strides);
  if (data == NULL || !PyTuple_Check(data) || typestr == NULL || !PyUnicode_Check(typestr) || shape == NULL)
    return aot_fail(err, AOT_E_TYPE, "argument %s: malformed __cuda_array_interface__", arg);
  t->ptr = PyLong_AsUnsignedLongLong(PyTuple_GetItem(data, 0));
  if (PyErr_Occurred()) return -1;
  t->dtype = -2;
  for (int code = 0; code < aot_num_dtypes && t->dtype == -2; code++)
    if (aot_dtype_typestrs[code] && PyUnicode_CompareWithASCIIString(typestr, aot_dtype_typestrs[code]) == 0)
      t->dtype = code;
  if (t->dtype == -2) {
    char ts[16];
    return aot_fail(err, AOT_E_TYPE, "argument %s has typestr %s, which no kernel here takes", arg,
                    text_of(typestr, ts, sizeof ts));
  }
  if ((t->ndim = int_tuple(shape, t->shape, AOT_MAX_DIMS, arg, "shape", err)) < 0) return -1;
  if (strides == NULL || strides == Py_None) {
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) t->strides[d] = s, s = aot_sat_mul(s, t->shape[d]);
  } else {
    if (int_tuple(strides, t->strides, AOT_MAX_DIMS, arg, "strides", err) < 0) return -1;
    for (int d = 0; d < t->ndim; d++) {
      int64_t size = aot_dtype_sizes[t->dtype];
      if (t->strides[d] % size != 0)
        return aot_fail(err, AOT_E_VALUE, "argument %s: a stride is not a whole number of elements", arg);
      t->strides[d] /= size;
    }
  }
  if (t->ptr == 0) return -2; /* an empty array: no device to read off */
  return aot_pointer_device(t->ptr, arg, err);
}

/* A DLPack producer (JAX, CuPy, ...): read its DLTensor, then let the capsule go unconsumed (its
 * destructor releases it; the caller's object keeps the memory alive, as for any launch). */
static int dlpack_arg(PyObject *obj, aot_tensor *t, const char *arg, aot_error *err) {
  PyObject *capsule = PyObject_CallMethod(obj, "__dlpack__", NULL);
  if (capsule == NULL) return -1;
  const dl_tensor *dl = PyCapsule_GetPointer(capsule, "dltensor"); /* DLManagedTensor starts with it */
  int device = -1;
  if (dl == NULL) {
    PyErr_Clear();
    aot_fail(err, AOT_E_TYPE, "argument %s: __dlpack__ did not return a DLPack capsule", arg);
  } else if (dl->device.type != DL_CUDA && dl->device.type != DL_CUDA_MANAGED) {
    aot_fail(err, AOT_E_VALUE, "argument %s is not in CUDA memory (DLPack device type %d)", arg, dl->device.type);
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
      device = dl->device.id;
    }
  }
  Py_DECREF(capsule);
  return device;
}

/* Fill one pointer argument; returns its device, -2 when it names none, -1 on error. */
static int pointer_arg(const aot_param *prm, PyObject *obj, aot_tensor *t, int *is_torch, aot_error *err) {
  const char *arg = prm->name;
  t->dtype = -1;
  t->ndim = -1;
  if (torch_ready() && PyObject_TypeCheck(obj, (PyTypeObject *)torch_tensor)) {
    *is_torch = 1;
    /* the exchange reads the tensor underneath: only for types that override none of the reads */
    PyObject *type = (PyObject *)Py_TYPE(obj);
    int device = torch_exchange && (type == torch_tensor || type == torch_parameter)
                     ? exchange_arg(obj, t, prm->shape_use, arg, err)
                     : NOT_DESCRIBED;
    return device != NOT_DESCRIBED ? device : torch_arg(obj, t, prm->shape_use, arg, err);
  }
  if (PyLong_Check(obj)) {
    t->ptr = PyLong_AsUnsignedLong(obj);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return aot_fail(err, AOT_E_VALUE, "argument %s: a raw pointer must be a non-negative 64-bit integer", arg);
    }
    return t->ptr == 0 ? -2 : aot_pointer_device(t->ptr, arg, err);
  }
  PyObject *cai = PyObject_GetAttr(obj, s_cai);
  if (cai != NULL) {
    int device = cai_arg(cai, t, arg, err);
    Py_DECREF(cai);
    return device;
  }
  PyErr_Clear();
  if (PyObject_HasAttrString(obj, "__dlpack__")) return dlpack_arg(obj, t, arg, err);
  char tname[64];
  return aot_fail(err, AOT_E_TYPE,
                  "argument %s: expected a CUDA tensor, an object with __cuda_array_interface__ or __dlpack__, "
                  "or an integer device pointer, got %s",
                  arg, type_name(obj, tname, sizeof tname));
}

static int scalar_arg(const aot_param *prm, PyObject *obj, aot_call *call, int p, aot_error *err) {
  if (prm->kind == AOT_ARG_F16 || prm->kind == AOT_ARG_BF16 || prm->kind == AOT_ARG_F32 || prm->kind == AOT_ARG_F64) {
    call->f[p] = PyFloat_AsDouble(obj);
    if (call->f[p] == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      char tname[64];
      return aot_fail(err, AOT_E_TYPE, "argument %s: expected a float, got %s", prm->name,
                      type_name(obj, tname, sizeof tname));
    }
    return 0;
  }
  PyObject *index = PyNumber_Index(obj);
  if (index == NULL) {
    PyErr_Clear();
    char tname[64];
    return aot_fail(err, AOT_E_TYPE, "argument %s: expected %s, got %s", prm->name,
                    prm->kind == AOT_ARG_BOOL ? "a bool" : "an integer", type_name(obj, tname, sizeof tname));
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  if (overflow > 0 && prm->kind == AOT_ARG_U64) v = (long long)PyLong_AsUnsignedLongLong(index);
  Py_DECREF(index);
  if (PyErr_Occurred() || (overflow && prm->kind != AOT_ARG_U64) || (overflow < 0)) {
    PyErr_Clear();
    return aot_fail(err, AOT_E_VALUE, "argument %s: the integer is out of range", prm->name);
  }
  call->i[p] = v;
  return 0;
}

static int stream_of(PyObject *obj, uint64_t *out, aot_error *err) {
  PyObject *handle = PyLong_Check(obj) ? (Py_INCREF(obj), obj) : PyObject_GetAttr(obj, s_cuda_stream);
  if (handle == NULL) {
    PyErr_Clear();
    char tname[64];
    return aot_fail(err, AOT_E_TYPE,
                    "argument stream: expected an integer CUstream handle or an object with .cuda_stream "
                    "(torch.cuda.Stream), got %s",
                    type_name(obj, tname, sizeof tname));
  }
  *out = PyLong_AsUnsignedLongLong(handle);
  Py_DECREF(handle);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return aot_fail(err, AOT_E_VALUE, "argument stream: not a valid stream handle");
  }
  return 0;
}

/* Parse the call; on success returns the device and sets *stream and *forced. */
static int parse(const aot_kernel *k, PyObject *const *args, Py_ssize_t nargs, PyObject *kwargs, aot_call *call,
                 uint64_t *stream, int *forced) {
  aot_error *err = call->err;
  PyObject *values[AOT_MAX_ARGS] = {NULL};
  PyObject *stream_obj = NULL;
  *forced = -1;
  if (nargs > k->nparams)
    return aot_fail(err, AOT_E_TYPE, "%s() takes at most %d positional arguments (%zd given)", k->name, k->nparams,
                    nargs);
  /* Python's order: the arguments without a default first, then those with one (k->call_order) */
  for (Py_ssize_t i = 0; i < nargs; i++) values[k->call_order[i]] = args[i];
  if (kwargs != NULL) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      if (PyUnicode_CompareWithASCIIString(key, "stream") == 0) {
        stream_obj = value;
        continue;
      }
      if (PyUnicode_CompareWithASCIIString(key, "variant") == 0) {
        char id[256];
        if (value == Py_None) continue;
        if (!PyUnicode_Check(value))
          return aot_fail(err, AOT_E_TYPE, "argument variant: expected a variant id (str)");
        if ((*forced = aot_find_variant(k, text_of(value, id, sizeof id), err)) < 0) return -1;
        continue;
      }
      int p = 0;
      while (p < k->nparams && PyUnicode_CompareWithASCIIString(key, k->params[p].name) != 0) p++;
      char name[128];
      if (p == k->nparams)
        return aot_fail(err, AOT_E_TYPE, "%s() got an unexpected keyword argument '%s'", k->name,
                        text_of(key, name, sizeof name));
      if (values[p] != NULL)
        return aot_fail(err, AOT_E_TYPE, "%s() got multiple values for argument '%s'", k->name, k->params[p].name);
      values[p] = value;
    }
  }
  for (int p = 0; p < k->nparams; p++) {
    if (values[p] == NULL && !k->params[p].has_default)
      return aot_fail(err, AOT_E_TYPE, "%s() missing required argument '%s'", k->name, k->params[p].name);
  }
  int device = -2, device_from = -1, any_torch = 0;
  for (int p = 0; p < k->nparams; p++) {
    const aot_param *prm = &k->params[p];
    if (values[p] == NULL || (values[p] == Py_None && prm->has_default)) continue;
    call->given |= UINT64_C(1) << p;
    if (values[p] == Py_None && prm->optional) {
      call->none |= UINT64_C(1) << p;
      call->t[p].ptr = 0, call->t[p].dtype = -1, call->t[p].ndim = -1;
      continue;
    }
    if (prm->kind != AOT_ARG_PTR) {
      if (scalar_arg(prm, values[p], call, p, err) < 0) return -1;
      continue;
    }
    int is_torch = 0;
    int dev = pointer_arg(prm, values[p], &call->t[p], &is_torch, err);
    if (dev == -1) return -1;
    any_torch |= is_torch;
    if (dev >= 0 && device >= 0 && dev != device)
      return aot_fail(err, AOT_E_VALUE, "argument %s is on cuda:%d but %s is on cuda:%d; put all on one device",
                      prm->name, dev, k->params[device_from].name, device);
    if (dev >= 0 && device < 0) device = dev, device_from = p;
  }
  if (device < 0) device = 0; /* only empty or null pointers: any device will do */
  *stream = 0;
  if (stream_obj != NULL && stream_obj != Py_None) {
    if (stream_of(stream_obj, stream, err) < 0) return -1;
  } else if (any_torch && torch_exchange != NULL) {
    void *s = NULL;
    if (torch_exchange->current_work_stream(DL_CUDA, device, &s) != 0) return -1;
    *stream = (uint64_t)(uintptr_t)s;
  } else if (any_torch && torch_raw_stream != NULL) {
    PyObject *s = device < AOT_MAX_DEVICES ? PyObject_CallFunctionObjArgs(torch_raw_stream, small_ints[device], NULL)
                                           : PyObject_CallFunction(torch_raw_stream, "i", device);
    if (s == NULL) return -1;
    *stream = PyLong_AsUnsignedLong(s);
    Py_DECREF(s);
    if (PyErr_Occurred()) return -1;
  }
  return device;
}

/* A call's positional arguments as an array (borrowed), or -1 with a TypeError when there are too many. */
static Py_ssize_t positional(const aot_kernel *k, PyObject *args, PyObject **out) {
  Py_ssize_t n = PyTuple_Size(args);
  if (n > k->nparams) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)", k->name, k->nparams, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) out[i] = PyTuple_GetItem(args, i);
  return n;
}

/* The first call of a class miss, warned when the package asked for it. */
static int warn_miss(const aot_kernel *k, const aot_call *call) {
  int spec;
  char jit[AOT_MAX_ARGS + 1];
  uint64_t calls;
  if (miss_warning == NULL || aot_miss_get(k, call->new_miss - 1, &spec, jit, &calls, NULL) != 0) return 0;
  return PyErr_WarnFormat(miss_warning, 1,
                          "%s.%s: a call ran class %s where Triton's JIT would compile class %s; add it to the "
                          "recipe (kernels.%s.classes: [%s]) and rebuild, or let `aotpack record -o RECIPE -- "
                          "PROGRAM` add every class miss (%s.stats() lists them)",
                          k->package, k->name, k->spec_names[spec], jit, k->name, jit, k->package);
}

PyObject *aot_py_call(const aot_kernel *k, PyObject *args, PyObject *kwargs) {
  aot_error err = {AOT_OK, ""};
  aot_call call;
  aot_call_start(&call, k, &err);
  uint64_t stream;
  int forced;
  PyObject *pos[AOT_MAX_ARGS];
  Py_ssize_t npos = positional(k, args, pos);
  if (npos < 0) return NULL;
  int device = parse(k, pos, npos, kwargs, &call, &stream, &forced);
  if (device < 0) return PyErr_Occurred() ? NULL : raise(&err);
  /* The GIL stays held: a launch takes microseconds, and the first call's module load never waits
   * for Python, so holding it cannot deadlock and saves a release/acquire on every call. */
  if (aot_launch(k, &call, device, (aot_stream)(uintptr_t)stream, forced) != 0) return raise(&err);
  if (call.new_miss && warn_miss(k, &call) < 0) return NULL;
  Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- Triton's launch syntax */

/* A runner is a builtin bound to (capsule of the kernel, spec); see aot_python.h for the spec. */
enum { SPEC_NAMES, SPEC_RUNTIME, SPEC_DEFAULTS, SPEC_CONFIGS, SPEC_OPTIONS, SPEC_SELECTING, SPEC_PLAIN, SPEC_FALLBACK,
       SPEC_LEN };
#define AOT_MAX_PARAMS (2 * AOT_MAX_ARGS) /* runtime arguments and constexprs */

/* A constexpr as the configs hold it: plain Python values as they are, others (tl.constexpr) through
 * the spec's unwrapper. Returns a new reference. */
static PyObject *plain(PyObject *spec, PyObject *value) {
  if (value == Py_None || PyLong_Check(value) || PyFloat_Check(value) || PyUnicode_Check(value)) {
    Py_INCREF(value);
    return value;
  }
  return PyObject_CallFunctionObjArgs(PyTuple_GetItem(spec, SPEC_PLAIN), value, NULL);
}

/* The config index the call's constexprs and options pick, or -1 with MissingVariant set. */
static long pick_config(const aot_kernel *k, PyObject *spec, PyObject *const *values, PyObject *num_warps,
                        PyObject *num_stages) {
  PyObject *names = PyTuple_GetItem(spec, SPEC_NAMES), *runtime = PyTuple_GetItem(spec, SPEC_RUNTIME);
  Py_ssize_t n = PyTuple_Size(names), nconst = 0;
  for (Py_ssize_t i = 0; i < n; i++) nconst += PyTuple_GetItem(runtime, i) == Py_False;
  PyObject *consts = PyTuple_New(nconst);
  for (Py_ssize_t i = 0, c = 0; consts != NULL && i < n; i++) {
    if (PyTuple_GetItem(runtime, i) != Py_False) continue;
    PyObject *v = plain(spec, values[i]);
    if (v == NULL || PyTuple_SetItem(consts, c++, v) < 0) Py_CLEAR(consts);
  }
  PyObject *key = consts ? PyTuple_Pack(3, consts, num_warps, num_stages) : NULL;
  PyObject *found = key ? PyDict_GetItemWithError(PyTuple_GetItem(spec, SPEC_CONFIGS), key) : NULL;
  long config = found ? PyLong_AsLong(found) : -1;
  if (key != NULL && found == NULL && !PyErr_Occurred()) {
    PyObject *shown = PyUnicode_FromString("");
    for (Py_ssize_t i = 0, c = 0; shown != NULL && i < n; i++) {
      if (PyTuple_GetItem(runtime, i) != Py_False) continue;
      PyObject *part = PyUnicode_FromFormat("%U=%R, ", PyTuple_GetItem(names, i), PyTuple_GetItem(consts, c++));
      PyObject *joined = part ? PyUnicode_Concat(shown, part) : NULL;
      Py_XDECREF(part);
      Py_DECREF(shown);
      shown = joined;
    }
    if (shown != NULL)
      PyErr_Format(missing_error,
                   "%s[grid](...): no variant was built for %Unum_warps=%R, num_stages=%R; record a run that makes "
                   "this call",
                   k->name, shown, num_warps, num_stages);
    Py_XDECREF(shown);
  }
  Py_XDECREF(key);
  Py_XDECREF(consts);
  return config;
}

/* Sort the keywords of a call into values[] (by the spec's names), grid, warmup and the options. */
static int run_keywords(const aot_kernel *k, PyObject *spec, PyObject *kwargs, PyObject **values, PyObject **grid,
                        int *warmup, PyObject **num_warps, PyObject **num_stages) {
  PyObject *names = PyTuple_GetItem(spec, SPEC_NAMES), *options = PyTuple_GetItem(spec, SPEC_OPTIONS);
  Py_ssize_t n = PyTuple_Size(names), pos = 0;
  PyObject *key, *value;
  while (kwargs != NULL && PyDict_Next(kwargs, &pos, &key, &value)) {
    if (PyUnicode_CompareWithASCIIString(key, "grid") == 0) {
      *grid = value;
    } else if (PyUnicode_CompareWithASCIIString(key, "warmup") == 0) {
      if ((*warmup = PyObject_IsTrue(value)) < 0) return -1;
    } else if (PyUnicode_CompareWithASCIIString(key, "num_warps") == 0) {
      *num_warps = value;
    } else if (PyUnicode_CompareWithASCIIString(key, "num_stages") == 0) {
      *num_stages = value;
    } else {
      Py_ssize_t i = 0;
      while (i < n && PyUnicode_Compare(key, PyTuple_GetItem(names, i)) != 0) i++;
      if (i < n && values[i] != NULL) {
        PyErr_Format(PyExc_TypeError, "%s[grid]() got multiple values for argument %R", k->name, key);
        return -1;
      }
      if (i < n) {
        values[i] = value;
        continue;
      }
      PyObject *built = PyDict_GetItemWithError(options, key); /* a launch option the variants were built with */
      int same = built != NULL ? PyObject_RichCompareBool(built, value, Py_EQ) : 0;
      if (same < 0 || PyErr_Occurred()) return -1;
      if (same) continue;
      int selecting = PySequence_Contains(PyTuple_GetItem(spec, SPEC_SELECTING), key);
      if (selecting < 0) return -1;
      if (selecting)
        PyErr_Format(missing_error, "%s[grid](...): no variant was built with %U=%R", k->name, key, value);
      else
        PyErr_Format(PyExc_TypeError, "%s[grid]() got an unexpected keyword argument %R", k->name, key);
      return -1;
    }
  }
  if (*grid == NULL) {
    PyErr_Format(PyExc_TypeError, "%s.run() missing the keyword argument 'grid'", k->name);
    return -1;
  }
  return 0;
}

static PyObject *run_launch(PyObject *self, PyObject *args, PyObject *kwargs) {
  const aot_kernel *k = PyCapsule_GetPointer(PyTuple_GetItem(self, 0), NULL);
  PyObject *spec = PyTuple_GetItem(self, 1);
  if (k == NULL || spec == NULL) return NULL;
  PyObject *names = PyTuple_GetItem(spec, SPEC_NAMES), *runtime = PyTuple_GetItem(spec, SPEC_RUNTIME);
  Py_ssize_t n = PyTuple_Size(names), nargs = PyTuple_Size(args);
  if (n > AOT_MAX_PARAMS)
    return PyErr_Format(PyExc_TypeError, "%s: %zd parameters; at most %d are supported", k->name, n, AOT_MAX_PARAMS);
  if (nargs > n) return PyErr_Format(PyExc_TypeError, "%s[grid]() takes %zd arguments (%zd given)", k->name, n, nargs);
  PyObject *values[AOT_MAX_PARAMS] = {NULL}, *grid = NULL;
  PyObject *num_warps = small_ints[4], *num_stages = small_ints[3]; /* Triton's defaults */
  int warmup = 0;
  for (Py_ssize_t i = 0; i < nargs; i++) values[i] = PyTuple_GetItem(args, i);
  if (run_keywords(k, spec, kwargs, values, &grid, &warmup, &num_warps, &num_stages) < 0) return NULL;
  PyObject *defaults = PyTuple_GetItem(spec, SPEC_DEFAULTS);
  for (Py_ssize_t i = 0; i < n; i++) {
    if (values[i] != NULL) continue;
    values[i] = PyDict_GetItemWithError(defaults, PyTuple_GetItem(names, i));
    if (values[i] == NULL)
      return PyErr_Occurred() ? NULL
                              : PyErr_Format(PyExc_TypeError, "%s[grid]() missing required argument %R", k->name,
                                             PyTuple_GetItem(names, i));
  }
  long config = pick_config(k, spec, values, num_warps, num_stages);
  if (config < 0) return NULL;
  if (config >= k->nconfigs) return PyErr_Format(PyExc_ValueError, "%s: no config %ld", k->name, config);
  if (warmup) Py_RETURN_NONE;
  aot_error err = {AOT_OK, ""};
  aot_call call;
  aot_call_start(&call, k, &err);
  int64_t dims[3] = {1, 1, 1};
  PyObject *computed = grid;
  Py_INCREF(computed);
  if (PyCallable_Check(grid)) { /* Triton calls it with the arguments by name, constexprs included */
    PyObject *bound = PyDict_New();
    for (Py_ssize_t i = 0; bound != NULL && i < n; i++)
      if (PyDict_SetItem(bound, PyTuple_GetItem(names, i), values[i]) < 0) Py_CLEAR(bound);
    Py_DECREF(computed);
    computed = bound ? PyObject_CallFunctionObjArgs(grid, bound, NULL) : NULL;
    Py_XDECREF(bound);
    if (computed == NULL) return NULL;
  }
  int got = int_tuple(computed, dims, 3, "grid", "dimensions", &err);
  Py_DECREF(computed);
  if (got < 0) return raise(&err);
  if (got == 0) return PyErr_Format(PyExc_ValueError, "%s[grid]: the grid has no dimensions", k->name);
  PyObject *rest[AOT_MAX_ARGS];
  Py_ssize_t nrest = 0;
  for (Py_ssize_t i = 0; i < n; i++)
    if (PyTuple_GetItem(runtime, i) == Py_True) {
      if (nrest == k->nparams) return PyErr_Format(PyExc_ValueError, "%s: more runtime arguments than built", k->name);
      rest[nrest++] = values[i];
    }
  uint64_t stream;
  int forced;
  int device = parse(k, rest, nrest, NULL, &call, &stream, &forced);
  if (device < 0) return PyErr_Occurred() ? NULL : raise(&err);
  call.launch_config = (int)config + 1;
  memcpy(call.grid, dims, sizeof dims);
  if (aot_launch(k, &call, device, (aot_stream)(uintptr_t)stream, -1) != 0) return raise(&err);
  Py_RETURN_NONE;
}

/* The runner: run_launch, and on MissingVariant the spec's fallback (when it has one) with the
 * exception's text and the call as made. */
static PyObject *run(PyObject *self, PyObject *args, PyObject *kwargs) {
  PyObject *done = run_launch(self, args, kwargs);
  PyObject *fallback = PyTuple_GetItem(PyTuple_GetItem(self, 1), SPEC_FALLBACK);
  if (done != NULL || fallback == NULL || fallback == Py_None || !PyErr_ExceptionMatches(missing_error)) return done;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyObject *message = value ? PyObject_Str(value) : PyUnicode_FromString("no variant");
  PyObject *empty = kwargs == NULL ? PyDict_New() : NULL;
  done = message ? PyObject_CallFunctionObjArgs(fallback, message, args, kwargs ? kwargs : empty, NULL) : NULL;
  Py_XDECREF(empty);
  Py_XDECREF(message);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return done;
}

static PyMethodDef run_def = {"run", (PyCFunction)(void (*)(void))run, METH_VARARGS | METH_KEYWORDS,
                              "run(*args, grid, warmup=False, num_warps=4, num_stages=3, **constexprs): launch "
                              "in Triton's syntax"};

PyObject *aot_py_runner(const aot_kernel *k, PyObject *spec) {
  if (!PyTuple_Check(spec) || PyTuple_Size(spec) != SPEC_LEN)
    return PyErr_Format(PyExc_TypeError, "_runner_%s(spec): expected a tuple of %d", k->name, (int)SPEC_LEN);
  PyObject *capsule = PyCapsule_New((void *)k, NULL, NULL);
  PyObject *self = capsule ? PyTuple_Pack(2, capsule, spec) : NULL;
  Py_XDECREF(capsule);
  PyObject *fn = self ? PyCFunction_NewEx(&run_def, self, NULL) : NULL;
  Py_XDECREF(self);
  return fn;
}

PyObject *aot_py_choose(const aot_kernel *k, PyObject *args) {
  aot_error err = {AOT_OK, ""};
  PyObject *key_obj;
  int binding, device;
  if (!PyArg_ParseTuple(args, "Oii", &key_obj, &binding, &device)) return NULL;
  int64_t key[AOT_MAX_KEY];
  int n = int_tuple(key_obj, key, AOT_MAX_KEY, "key", "values", &err);
  if (n < 0) return raise(&err);
  if (n != k->nkey) return PyErr_Format(PyExc_TypeError, "%s.select(): expected %d key values, got %d", k->name,
                                        k->nkey, n);
  int v = aot_choose_key(k, key, binding, device, &err);
  if (v < 0) return raise(&err);
  return PyUnicode_FromString(k->variants[v].id);
}

PyObject *aot_py_select(const aot_kernel *k, PyObject *args, PyObject *kwargs) {
  aot_error err = {AOT_OK, ""};
  aot_call call;
  aot_call_start(&call, k, &err);
  uint64_t stream;
  int forced;
  PyObject *pos[AOT_MAX_ARGS];
  Py_ssize_t npos = positional(k, args, pos);
  if (npos < 0) return NULL;
  int device = parse(k, pos, npos, kwargs, &call, &stream, &forced);
  if (device < 0) return PyErr_Occurred() ? NULL : raise(&err);
  int v = aot_select(k, &call, device, forced);
  if (v < 0) return raise(&err);
  return PyUnicode_FromString(k->variants[v].id);
}

PyObject *aot_py_autotune(PyObject *module, PyObject *args) {
  (void)module;
  int mode;
  if (!PyArg_ParseTuple(args, "i", &mode)) return NULL;
  if (mode < AOT_TUNE_OFF || mode > AOT_TUNE_KEY) return PyErr_Format(PyExc_ValueError, "no tuning mode %d", mode);
  aot_autotune_enable(mode);
  Py_RETURN_NONE;
}

static const aot_kernel *kernel_named(const char *name) {
  for (int i = 0; i < aot_num_kernels; i++)
    if (strcmp(aot_all_kernels[i]->name, name) == 0) return aot_all_kernels[i];
  PyErr_Format(PyExc_ValueError, "no kernel %s", name);
  return NULL;
}

/* ---------------------------------------------------------------- the kernel object */

/* The base of a package's kernel objects (aot_kernels.py's Kernel adds the Python side): calling one goes
 * from the interpreter straight to aot_py_call, with no __call__ looked up and no function in between. */
typedef struct {
  PyObject_HEAD
  const aot_kernel *k;
} kernel_object;

static PyObject *kernel_new(PyTypeObject *cls, PyObject *args, PyObject *kwargs) {
  const char *name;
  if (kwargs != NULL) return PyErr_Format(PyExc_TypeError, "_Kernel(name) takes no keyword arguments");
  if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
  const aot_kernel *k = kernel_named(name);
  allocfunc alloc = (allocfunc)PyType_GetSlot(cls, Py_tp_alloc);
  kernel_object *self = k && alloc ? (kernel_object *)alloc(cls, 0) : NULL;
  if (self != NULL) self->k = k;
  return (PyObject *)self;
}

static PyObject *kernel_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  return aot_py_call(((kernel_object *)self)->k, args, kwargs);
}

static void kernel_dealloc(PyObject *self) {
  PyTypeObject *type = Py_TYPE(self); /* a heap type: its instances hold a reference to it */
  ((freefunc)PyType_GetSlot(type, Py_tp_free))(self);
  Py_DECREF(type);
}

static int add_kernel_type(PyObject *module, const char *package) {
  static char name[256];
  snprintf(name, sizeof name, "%s._native._Kernel", package);
  static PyType_Slot slots[] = {
      {Py_tp_new, (void *)kernel_new},
      {Py_tp_call, (void *)kernel_call},
      {Py_tp_dealloc, (void *)kernel_dealloc},
      {Py_tp_doc, (void *)"_Kernel(name): calling it launches the kernel `name` (the base of the kernel objects)."},
      {0, NULL},
  };
  static PyType_Spec spec = {name, sizeof(kernel_object), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots};
  PyObject *type = PyType_FromSpec(&spec);
  if (type == NULL || PyModule_AddObject(module, "_Kernel", type) < 0) {
    Py_XDECREF(type);
    return -1;
  }
  return 0;
}

PyObject *aot_py_memo(PyObject *module, PyObject *args) {
  (void)module;
  const char *name;
  if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
  const aot_kernel *k = kernel_named(name);
  PyObject *out = k ? PyList_New(0) : NULL;
  aot_tuned t;
  for (int i = 0; out != NULL && aot_memo_get(k, i, &t) == 0; i++) {
    PyObject *key = PyTuple_New(k->nkey);
    for (int d = 0; key != NULL && d < k->nkey; d++) PyTuple_SetItem(key, d, PyLong_FromLongLong(t.key[d]));
    PyObject *row = key ? Py_BuildValue("(sisNs)", k->targets[t.target].id, t.binding, k->spec_names[t.spec], key,
                                        k->config_labels[t.config])
                        : NULL;
    if (row == NULL || PyList_Append(out, row) < 0) Py_CLEAR(out);
    Py_XDECREF(row);
  }
  return out;
}

PyObject *aot_py_memo_put(PyObject *module, PyObject *args) {
  (void)module;
  const char *name, *target, *config, *spec;
  PyObject *key_obj;
  aot_tuned t;
  aot_error err = {AOT_OK, ""};
  if (!PyArg_ParseTuple(args, "ssisOs", &name, &target, &t.binding, &spec, &key_obj, &config)) return NULL;
  const aot_kernel *k = kernel_named(name);
  if (k == NULL) return NULL;
  t.target = t.config = t.spec = -1;
  for (int i = 0; i < k->nspecs; i++)
    if (strcmp(k->spec_names[i], spec) == 0) t.spec = i;
  for (int i = 0; i < k->ntargets; i++)
    if (strcmp(k->targets[i].id, target) == 0) t.target = i;
  for (int i = 0; i < k->nconfigs; i++)
    if (strcmp(k->config_labels[i], config) == 0) t.config = i;
  if (t.target < 0 || t.config < 0 || t.spec < 0 || t.binding < 0 || t.binding >= k->nbindings)
    return PyErr_Format(PyExc_ValueError, "%s: no target %s, config %s or class %s (a cache from another build?)",
                        name, target, config, spec);
  if (int_tuple(key_obj, t.key, AOT_MAX_KEY, "key", "values", &err) != k->nkey) {
    PyErr_Format(PyExc_ValueError, "%s: expected %d key values", name, k->nkey);
    return NULL;
  }
  if (aot_memo_put(k, &t) != 0) return PyErr_NoMemory();
  Py_RETURN_NONE;
}

PyObject *aot_py_misses(PyObject *module, PyObject *args) {
  (void)module;
  const char *name;
  if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
  const aot_kernel *k = kernel_named(name);
  if (k == NULL) return NULL;
  int spec;
  char jit[AOT_MAX_ARGS + 1];
  uint64_t calls, lost;
  aot_miss_get(k, -1, &spec, jit, &calls, &lost);
  PyObject *rows = PyList_New(0);
  for (int i = 0; rows != NULL && aot_miss_get(k, i, &spec, jit, &calls, NULL) == 0; i++) {
    if (calls == 0) continue; /* seen by select() only */
    PyObject *row = Py_BuildValue("(ssK)", k->spec_names[spec], jit, (unsigned long long)calls);
    if (row == NULL || PyList_Append(rows, row) < 0) Py_CLEAR(rows);
    Py_XDECREF(row);
  }
  return rows == NULL ? NULL : Py_BuildValue("(NK)", rows, (unsigned long long)lost);
}

PyObject *aot_py_warn_misses(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *category;
  if (!PyArg_ParseTuple(args, "O", &category)) return NULL;
  PyObject *old = miss_warning;
  if (category != Py_None) Py_INCREF(category);
  miss_warning = category == Py_None ? NULL : category;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

PyObject *aot_py_image(PyObject *module, PyObject *args) {
  (void)module;
  const char *name, *id;
  if (!PyArg_ParseTuple(args, "ss", &name, &id)) return NULL;
  const aot_kernel *k = kernel_named(name);
  if (k == NULL) return NULL;
  aot_error err = {AOT_OK, ""};
  int v = aot_find_variant(k, id, &err);
  if (v < 0) return raise(&err);
  const aot_variant *var = &k->variants[v];
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)var->raw_size); /* room for the NUL too */
  if (out != NULL && aot_unpack(var, (unsigned char *)PyBytes_AsString(out), &err) != 0) {
    Py_DECREF(out);
    return raise(&err);
  }
  return out;
}
