/* A Python call's arguments read into an aot_call: tensors (torch's, through its methods or DLPack's C
 * exchange API; __cuda_array_interface__ and __dlpack__ objects; raw pointers), scalars, the stream.
 * Torch is never imported here: when the caller has imported it, its tensor type, dtypes and current-stream
 * getter are looked up once and used as a fast path. */
#include "aot_py_internal.h"

_Static_assert(sizeof(unsigned long) == 8, "pointers are read as unsigned long (LP64)");
static PyObject *torch_tensor; /* torch.Tensor, once torch is imported */
static PyObject *torch_dtypes[64];
static PyObject *torch_raw_stream; /* torch._C._cuda_getCurrentRawStream */
static PyObject *torch_parameter; /* torch.nn.Parameter: a tensor that overrides none of its reads */
enum { GET_DEVICE, DATA_PTR, STRIDE, IS_CONTIGUOUS, NUMEL, TENSOR_METHODS };
static PyObject *tensor_methods[TENSOR_METHODS]; /* torch.Tensor.get_device, .data_ptr, ... (the enum's order) */
static PyObject *s_data_ptr, *s_get_device, *s_dtype, *s_shape, *s_stride, *s_is_contiguous, *s_numel, *s_cai,
    *s_cuda_stream, *s_torch, *s_data, *s_typestr, *s_strides;
PyObject *bind_small_ints[AOT_MAX_DEVICES]; /* device ordinals; 4 and 3: Triton's num_warps and num_stages */

int bind_args_init(void) {
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
    if ((bind_small_ints[i] = PyLong_FromLong(i)) == NULL) return -1;
  return 0;
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
  bind_torch_exchange = bind_exchange_api(tensor);
  PyObject *nn = PyObject_GetAttrString(torch, "nn");
  torch_parameter = nn ? PyObject_GetAttrString(nn, "Parameter") : NULL;
  Py_XDECREF(nn);
  if (torch_parameter == NULL) PyErr_Clear();
  torch_tensor = tensor;
  return 1;
}

int bind_int_tuple(PyObject *seq, int64_t *out, int max, const char *arg, const char *what, aot_error *err) {
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
  int ok = strides != NULL && (t->ndim = bind_int_tuple(shape, t->shape, AOT_MAX_DIMS, arg, "shape", err)) >= 0 &&
           bind_int_tuple(strides, t->strides, AOT_MAX_DIMS, arg, "stride", err) >= 0;
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return ok ? 0 : -1;
}

/* The element type of a tensor, or of anything with a torch dtype, into t->dtype; -1 on error. */
static int torch_dtype(PyObject *obj, aot_tensor *t, const char *arg, aot_error *err) {
  PyObject *dtype = PyObject_GetAttr(obj, s_dtype);
  if (dtype == NULL) return -1;
  t->dtype = -2;
  for (int code = 0, known = torch_ready(); known && code < aot_num_dtypes; code++)
    if (torch_dtypes[code] == dtype) t->dtype = code;
  if (t->dtype == -2) {
    char name[64];
    bind_text_of(dtype, name, sizeof name);
    Py_DECREF(dtype);
    return aot_fail(err, AOT_E_TYPE, "argument %s has dtype %s, which no kernel here takes", arg, name);
  }
  Py_DECREF(dtype);
  return 0;
}

/* Where a pointer is: its device ordinal (the driver asked), or, planning a select() for a GPU that is not here
 * (select(target=...)), none asked: -2. */
static int device_of(uint64_t ptr, int planned, const char *arg, aot_error *err) {
  return planned ? -2 : aot_pointer_device(ptr, arg, err);
}

static int torch_arg(PyObject *obj, aot_tensor *t, int shape_use, int planned, const char *arg, aot_error *err) {
  long device = tensor_int(obj, GET_DEVICE, s_get_device);
  if (device == -1 && PyErr_Occurred()) return -1;
  if (device < 0 && planned) device = -2; /* a CPU or meta tensor describes the call all the same */
  if (device < 0 && !planned) {
    char where[64];
    PyObject *dev_obj = PyObject_GetAttrString(obj, "device");
    bind_text_of(dev_obj, where, sizeof where);
    Py_XDECREF(dev_obj);
    return aot_fail(err, AOT_E_VALUE, "argument %s is on %s; expected a CUDA tensor (select(..., target='sm_90a') "
                    "says which variant a GPU would run)", arg, where);
  }
  PyObject *ptr = tensor_method(obj, DATA_PTR, s_data_ptr);
  if (ptr == NULL) return -1;
  t->ptr = PyLong_AsUnsignedLong(ptr); /* 64 bits (LP64); unlike ...LongLong, no byte-array detour */
  Py_DECREF(ptr);
  if (PyErr_Occurred()) return -1;
  if (torch_dtype(obj, t, arg, err) < 0) return -1;
  return torch_shape(obj, t, shape_use, arg, err) < 0 ? -1 : (int)device;
}

/* An object with __cuda_array_interface__ (CuPy, Numba, ...). Its device is the pointer's. */
static int cai_arg(PyObject *cai, aot_tensor *t, int planned, const char *arg, aot_error *err) {
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
                    bind_text_of(typestr, ts, sizeof ts));
  }
  if ((t->ndim = bind_int_tuple(shape, t->shape, AOT_MAX_DIMS, arg, "shape", err)) < 0) return -1;
  if (strides == NULL || strides == Py_None) {
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) t->strides[d] = s, s = aot_sat_mul(s, t->shape[d]);
  } else {
    if (bind_int_tuple(strides, t->strides, AOT_MAX_DIMS, arg, "strides", err) < 0) return -1;
    for (int d = 0; d < t->ndim; d++) {
      int64_t size = aot_dtype_sizes[t->dtype];
      if (t->strides[d] % size != 0)
        return aot_fail(err, AOT_E_VALUE, "argument %s: a stride is not a whole number of elements", arg);
      t->strides[d] /= size;
    }
  }
  if (t->ptr == 0) return -2; /* an empty array: no device to read off */
  return device_of(t->ptr, planned, arg, err);
}

/* An object Triton's JIT takes as a tensor: any with data_ptr() and a torch dtype (FlagGems' StridedBuffer, a
 * library's tensor wrapper). Its device is the pointer's; its shape, where the kernel reads it, from shape and
 * stride(), as a torch tensor's. */
static int data_ptr_arg(PyObject *obj, aot_tensor *t, int use, int planned, const char *arg, aot_error *err) {
  PyObject *ptr = PyObject_CallMethodObjArgs(obj, s_data_ptr, NULL);
  if (ptr == NULL) return -1;
  t->ptr = PyLong_AsUnsignedLongLong(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return aot_fail(err, AOT_E_VALUE, "argument %s: data_ptr() is not a non-negative 64-bit integer", arg);
  }
  if (torch_dtype(obj, t, arg, err) < 0) return -1;
  if (use != AOT_SHAPE_NONE && torch_shape(obj, t, AOT_SHAPE_FULL, arg, err) < 0) return -1;
  return t->ptr == 0 ? -2 : device_of(t->ptr, planned, arg, err);
}

/* Fill one pointer argument; returns its device, -2 when it names none (or `planned`: none is asked), -1 on
 * error. */
static int pointer_arg(const aot_param *prm, PyObject *obj, aot_tensor *t, int *is_torch, int planned,
                       aot_error *err) {
  const char *arg = prm->name;
  t->dtype = -1;
  t->ndim = -1;
  if (torch_ready() && PyObject_TypeCheck(obj, (PyTypeObject *)torch_tensor)) {
    *is_torch = 1;
    /* the exchange reads the tensor underneath: only for types that override none of the reads */
    PyObject *type = (PyObject *)Py_TYPE(obj);
    int device = bind_torch_exchange && (type == torch_tensor || type == torch_parameter)
                     ? bind_exchange_arg(obj, t, prm->shape_use, arg, err)
                     : NOT_DESCRIBED;
    return device != NOT_DESCRIBED ? device : torch_arg(obj, t, prm->shape_use, planned, arg, err);
  }
  if (PyLong_Check(obj)) {
    t->ptr = PyLong_AsUnsignedLong(obj);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return aot_fail(err, AOT_E_VALUE, "argument %s: a raw pointer must be a non-negative 64-bit integer", arg);
    }
    return t->ptr == 0 ? -2 : device_of(t->ptr, planned, arg, err);
  }
  PyObject *cai = PyObject_GetAttr(obj, s_cai);
  if (cai != NULL) {
    int device = cai_arg(cai, t, planned, arg, err);
    Py_DECREF(cai);
    return device;
  }
  PyErr_Clear();
  if (PyObject_HasAttrString(obj, "__dlpack__")) return bind_dlpack_arg(obj, t, planned, arg, err);
  if (PyObject_HasAttr(obj, s_data_ptr) && PyObject_HasAttr(obj, s_dtype))
    return data_ptr_arg(obj, t, prm->shape_use, planned, arg, err);
  char tname[64];
  return aot_fail(err, AOT_E_TYPE,
                  "argument %s: expected a CUDA tensor, an object with __cuda_array_interface__ or __dlpack__ or "
                  "data_ptr() and dtype (as Triton takes), or an integer device pointer, got %s",
                  arg, bind_type_name(obj, tname, sizeof tname));
}

static int scalar_arg(const aot_param *prm, PyObject *obj, aot_call *call, int p, aot_error *err) {
  if (prm->kind == AOT_ARG_F16 || prm->kind == AOT_ARG_BF16 || prm->kind == AOT_ARG_F32 || prm->kind == AOT_ARG_F64) {
    call->f[p] = PyFloat_AsDouble(obj);
    if (call->f[p] == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      char tname[64];
      return aot_fail(err, AOT_E_TYPE, "argument %s: expected a float, got %s", prm->name,
                      bind_type_name(obj, tname, sizeof tname));
    }
    return 0;
  }
  PyObject *index = PyNumber_Index(obj);
  if (index == NULL) {
    PyErr_Clear();
    char tname[64];
    return aot_fail(err, AOT_E_TYPE, "argument %s: expected %s, got %s", prm->name,
                    prm->kind == AOT_ARG_BOOL ? "a bool" : "an integer", bind_type_name(obj, tname, sizeof tname));
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
                    bind_type_name(obj, tname, sizeof tname));
  }
  *out = PyLong_AsUnsignedLongLong(handle);
  Py_DECREF(handle);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return aot_fail(err, AOT_E_VALUE, "argument stream: not a valid stream handle");
  }
  return 0;
}

/* A GPU that need not be here, as select(target=..., sms=...) names it: the compute capability of an
 * architecture named as aotpack names targets (sm_90a: 90), and its multiprocessors (default: the tuning
 * GPU's). -1 and err when either is not one. */
int bind_planned(const aot_kernel *k, PyObject *target, PyObject *sms, bind_plan *plan, aot_error *err) {
  char name[32];
  bind_text_of(target, name, sizeof name);
  char *end = NULL;
  long capability = PyUnicode_Check(target) && strncmp(name, "sm_", 3) == 0 && name[3] >= '1' && name[3] <= '9'
                        ? strtol(name + 3, &end, 10)
                        : -1;
  if (capability < 10 || capability > 999 || end == NULL || (*end != '\0' && strcmp(end, "a") != 0 &&
                                                             strcmp(end, "f") != 0))
    return aot_fail(err, AOT_E_VALUE, "argument target: expected a GPU architecture as aotpack names targets "
                    "(sm_80, sm_90a, sm_100a), got %s", name);
  plan->capability = (int)capability;
  plan->sms = k->tuned_sms;
  if (sms != NULL && sms != Py_None) {
    long long n = PyLong_Check(sms) ? PyLong_AsLongLong(sms) : -1;
    if (n == -1 && PyErr_Occurred()) PyErr_Clear();
    if (n < 1 || n > 100000 || PyBool_Check(sms))
      return aot_fail(err, AOT_E_VALUE, "argument sms: expected the GPU's multiprocessor count (an integer from 1 "
                      "to 100000), got %s", bind_text_of(sms, name, sizeof name));
    plan->sms = (int)n;
  }
  return 0;
}

/* Parse the call; on success returns the device and sets *stream, *forced and *plan (its capability 0 unless
 * the call names target=: select() for a GPU that need not be here, no device asked of the arguments). */
int bind_parse(const aot_kernel *k, PyObject *const *args, Py_ssize_t nargs, PyObject *kwargs, aot_call *call,
               uint64_t *stream, int *forced, bind_plan *plan) {
  aot_error *err = call->err;
  PyObject *values[AOT_MAX_ARGS] = {NULL};
  PyObject *stream_obj = NULL, *target = NULL, *sms = NULL;
  *forced = -1;
  plan->capability = 0, plan->sms = 0;
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
      if (PyUnicode_CompareWithASCIIString(key, "target") == 0 || PyUnicode_CompareWithASCIIString(key, "sms") == 0) {
        *(PyUnicode_CompareWithASCIIString(key, "sms") == 0 ? &sms : &target) = value;
        continue;
      }
      if (PyUnicode_CompareWithASCIIString(key, "variant") == 0) {
        char id[256];
        if (value == Py_None) continue;
        if (!PyUnicode_Check(value))
          return aot_fail(err, AOT_E_TYPE, "argument variant: expected a variant id (str)");
        if ((*forced = aot_find_variant(k, bind_text_of(value, id, sizeof id), err)) < 0) return -1;
        continue;
      }
      int p = 0;
      while (p < k->nparams && PyUnicode_CompareWithASCIIString(key, k->params[p].name) != 0) p++;
      char name[128];
      if (p == k->nparams)
        return aot_fail(err, AOT_E_TYPE, "%s() got an unexpected keyword argument '%s'", k->name,
                        bind_text_of(key, name, sizeof name));
      if (values[p] != NULL)
        return aot_fail(err, AOT_E_TYPE, "%s() got multiple values for argument '%s'", k->name, k->params[p].name);
      values[p] = value;
    }
  }
  for (int p = 0; p < k->nparams; p++) {
    if (values[p] == NULL && !k->params[p].has_default)
      return aot_fail(err, AOT_E_TYPE, "%s() missing required argument '%s'", k->name, k->params[p].name);
  }
  if (sms != NULL && (target == NULL || target == Py_None))
    return aot_fail(err, AOT_E_TYPE, "argument sms: only with target= (select() for a GPU that need not be here)");
  if (target != NULL && target != Py_None && bind_planned(k, target, sms, plan, err) < 0) return -1;
  int planned = plan->capability > 0;
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
    int dev = pointer_arg(prm, values[p], &call->t[p], &is_torch, planned, err);
    if (dev == -1) return -1;
    any_torch |= is_torch;
    if (dev >= 0 && device >= 0 && dev != device)
      return aot_fail(err, AOT_E_VALUE, "argument %s is on cuda:%d but %s is on cuda:%d; put all on one device",
                      prm->name, dev, k->params[device_from].name, device);
    if (dev >= 0 && device < 0) device = dev, device_from = p;
  }
  if (device < 0) device = 0; /* only empty or null pointers: any device will do */
  *stream = 0;
  if (planned) return device; /* no stream: nothing is launched, and no CUDA is asked */
  if (stream_obj != NULL && stream_obj != Py_None) {
    if (stream_of(stream_obj, stream, err) < 0) return -1;
  } else if (any_torch && bind_torch_exchange != NULL) {
    void *s = NULL;
    if (bind_torch_exchange->current_work_stream(DL_CUDA, device, &s) != 0) return -1;
    *stream = (uint64_t)(uintptr_t)s;
  } else if (any_torch && torch_raw_stream != NULL) {
    PyObject *s = device < AOT_MAX_DEVICES ? PyObject_CallFunctionObjArgs(torch_raw_stream, bind_small_ints[device], NULL)
                                           : PyObject_CallFunction(torch_raw_stream, "i", device);
    if (s == NULL) return -1;
    *stream = PyLong_AsUnsignedLong(s);
    Py_DECREF(s);
    if (PyErr_Occurred()) return -1;
  }
  return device;
}
