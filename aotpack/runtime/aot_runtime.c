/* aotpack runtime; see aot_runtime.h. */
#include "aot_runtime.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the driver, loaded once */

typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef unsigned long long CUdeviceptr;
typedef struct CUevent_st *CUevent;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_NO_DEVICE = 100,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_MEMORYTYPE_HOST = 1,
  CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
  CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5,
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
  CU_CLUSTER_SCHEDULING_POLICY_SPREAD = 1,
  CU_MEM_ALLOCATION_TYPE_PINNED = 1,
  CU_MEM_LOCATION_TYPE_DEVICE = 1,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2,
};

/* cuLaunchKernelEx's configuration, laid out as in cuda.h. */
typedef struct {
  int id;
  char pad[4];
  union {
    char pad[64];
    int flag; /* cooperative, programmatic stream serialization, scheduling policy */
    struct {
      unsigned x, y, z;
    } cluster;
  } value;
} cu_launch_attribute;

typedef struct {
  unsigned grid[3], block[3], shared;
  aot_stream stream;
  cu_launch_attribute *attrs;
  unsigned nattrs;
} cu_launch_config;

typedef struct {
  _Alignas(64) unsigned char bytes[128];
} cu_tensor_map;

/* cuMemPoolCreate's properties, laid out as in cuda.h (88 bytes; the reserved tail must be 0). */
typedef struct {
  int alloc_type, handle_types;
  int location_type, location_id;
  void *win32_security_attributes;
  size_t max_size;
  unsigned short usage;
  unsigned char reserved[54];
} cu_mem_pool_props;

static struct {
  int (*Init)(unsigned);
  int (*DriverGetVersion)(int *);
  int (*DeviceGetCount)(int *);
  int (*DeviceGet)(CUdevice *, int);
  int (*DeviceGetAttribute)(int *, int, CUdevice);
  int (*DeviceGetName)(char *, int, CUdevice);
  int (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  int (*CtxGetCurrent)(CUcontext *);
  int (*CtxPushCurrent)(CUcontext);
  int (*CtxPopCurrent)(CUcontext *);
  int (*ModuleLoadData)(CUmodule *, const void *);
  int (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  int (*ModuleUnload)(CUmodule);
  int (*FuncSetAttribute)(CUfunction, int, int);
  int (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      aot_stream, void **, void **);
  int (*PointerGetAttribute)(void *, int, CUdeviceptr);
  int (*EventCreate)(CUevent *, unsigned);
  int (*EventRecord)(CUevent, aot_stream);
  int (*EventSynchronize)(CUevent);
  int (*EventElapsedTime)(float *, CUevent, CUevent);
  int (*EventDestroy)(CUevent);
  int (*StreamIsCapturing)(aot_stream, int *);
  int (*MemAlloc)(CUdeviceptr *, size_t);
  int (*MemFree)(CUdeviceptr);
  int (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, aot_stream);
  int (*GetErrorName)(int, const char **);
  int (*GetErrorString)(int, const char **);
  /* Newer entry points, looked up but optional: only variants that need them fail without them. */
  int (*LaunchKernelEx)(const cu_launch_config *, CUfunction, void **, void **);
  int (*TensorMapEncodeTiled)(cu_tensor_map *, int, unsigned, void *, const uint64_t *, const uint64_t *,
                              const uint32_t *, const uint32_t *, int, int, int, int);
  int (*MemPoolCreate)(void **, const cu_mem_pool_props *);
  int (*MemPoolSetAttribute)(void *, int, void *);
  int (*MemPoolDestroy)(void *);
  int (*MemAllocFromPoolAsync)(CUdeviceptr *, size_t, void *, aot_stream);
  int (*MemFreeAsync)(CUdeviceptr, aot_stream);
} cu;

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static aot_error driver_error; /* written once under driver_once, read-only after */
static int driver_version;
static int device_count;

int aot_fail(aot_error *err, aot_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  err->status = status;
  return -1;
}

static const char *cu_name(int rc) {
  const char *name = NULL;
  if (cu.GetErrorName == NULL || cu.GetErrorName(rc, &name) != CUDA_SUCCESS || name == NULL) return "unknown";
  return name;
}

static int cu_fail(aot_error *err, int rc, const char *what) {
  const char *text = NULL;
  if (cu.GetErrorString == NULL || cu.GetErrorString(rc, &text) != CUDA_SUCCESS || text == NULL) text = "";
  return aot_fail(err, AOT_E_CUDA, "%s failed: %s (%d): %s", what, cu_name(rc), rc, text);
}

static void load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *why = dlerror();
    aot_fail(&driver_error, AOT_E_CUDA,
             "no NVIDIA driver: libcuda.so.1 could not be loaded (%s). These kernels need a machine with an "
             "NVIDIA GPU and its driver installed",
             why ? why : "not found");
    return;
  }
#define AOT_SYM(field, symbol)                                                                               \
  do {                                                                                                       \
    *(void **)&cu.field = dlsym(lib, symbol);                                                                \
    if (cu.field == NULL) {                                                                                  \
      aot_fail(&driver_error, AOT_E_CUDA, "the NVIDIA driver's libcuda.so.1 lacks %s; update the driver",   \
               symbol);                                                                                      \
      return;                                                                                                \
    }                                                                                                        \
  } while (0)
  AOT_SYM(GetErrorName, "cuGetErrorName");
  AOT_SYM(GetErrorString, "cuGetErrorString");
  AOT_SYM(Init, "cuInit");
  AOT_SYM(DriverGetVersion, "cuDriverGetVersion");
  AOT_SYM(DeviceGetCount, "cuDeviceGetCount");
  AOT_SYM(DeviceGet, "cuDeviceGet");
  AOT_SYM(DeviceGetAttribute, "cuDeviceGetAttribute");
  AOT_SYM(DeviceGetName, "cuDeviceGetName");
  AOT_SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  AOT_SYM(CtxGetCurrent, "cuCtxGetCurrent");
  AOT_SYM(CtxPushCurrent, "cuCtxPushCurrent_v2");
  AOT_SYM(CtxPopCurrent, "cuCtxPopCurrent_v2");
  AOT_SYM(ModuleLoadData, "cuModuleLoadData");
  AOT_SYM(ModuleGetFunction, "cuModuleGetFunction");
  AOT_SYM(ModuleUnload, "cuModuleUnload");
  AOT_SYM(FuncSetAttribute, "cuFuncSetAttribute");
  AOT_SYM(LaunchKernel, "cuLaunchKernel");
  AOT_SYM(PointerGetAttribute, "cuPointerGetAttribute");
  AOT_SYM(EventCreate, "cuEventCreate");
  AOT_SYM(EventRecord, "cuEventRecord");
  AOT_SYM(EventSynchronize, "cuEventSynchronize");
  AOT_SYM(EventElapsedTime, "cuEventElapsedTime");
  AOT_SYM(EventDestroy, "cuEventDestroy_v2");
  AOT_SYM(StreamIsCapturing, "cuStreamIsCapturing");
  AOT_SYM(MemAlloc, "cuMemAlloc_v2");
  AOT_SYM(MemFree, "cuMemFree_v2");
  AOT_SYM(MemsetD8Async, "cuMemsetD8Async");
#undef AOT_SYM
  *(void **)&cu.LaunchKernelEx = dlsym(lib, "cuLaunchKernelEx");
  *(void **)&cu.TensorMapEncodeTiled = dlsym(lib, "cuTensorMapEncodeTiled");
  *(void **)&cu.MemPoolCreate = dlsym(lib, "cuMemPoolCreate");
  *(void **)&cu.MemPoolSetAttribute = dlsym(lib, "cuMemPoolSetAttribute");
  *(void **)&cu.MemPoolDestroy = dlsym(lib, "cuMemPoolDestroy");
  *(void **)&cu.MemAllocFromPoolAsync = dlsym(lib, "cuMemAllocFromPoolAsync");
  *(void **)&cu.MemFreeAsync = dlsym(lib, "cuMemFreeAsync");
  int rc = cu.Init(0);
  if (rc == CUDA_ERROR_NO_DEVICE) {
    aot_fail(&driver_error, AOT_E_CUDA, "no CUDA device: the NVIDIA driver is installed but sees no GPU "
                                        "(cuInit: CUDA_ERROR_NO_DEVICE); check CUDA_VISIBLE_DEVICES");
    return;
  }
  if (rc != CUDA_SUCCESS) {
    cu_fail(&driver_error, rc, "initializing the NVIDIA driver (cuInit)");
    return;
  }
  if ((rc = cu.DriverGetVersion(&driver_version)) != CUDA_SUCCESS ||
      (rc = cu.DeviceGetCount(&device_count)) != CUDA_SUCCESS) {
    cu_fail(&driver_error, rc, "querying the NVIDIA driver");
    return;
  }
  driver_error.status = AOT_OK;
}

static int driver(aot_error *err) {
  pthread_once(&driver_once, load_driver);
  if (driver_error.status != AOT_OK) {
    *err = driver_error;
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- devices, initialized lazily */

typedef struct {
  atomic_int ready; /* 0: not yet, 1: ready */
  CUcontext context;
  int capability;
  int max_shared_optin;
  int l2_bytes;
  char name[128];
  void *_Atomic scratch_pool; /* CUmemoryPool for kernel scratch, created on first need */
} device_state;

static device_state devices[AOT_MAX_DEVICES];
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static device_state *device(int ordinal, aot_error *err) {
  if (driver(err) != 0) return NULL;
  if (ordinal < 0 || ordinal >= device_count || ordinal >= AOT_MAX_DEVICES) {
    aot_fail(err, AOT_E_VALUE, "CUDA device %d does not exist (this machine has %d)", ordinal, device_count);
    return NULL;
  }
  device_state *d = &devices[ordinal];
  if (atomic_load_explicit(&d->ready, memory_order_acquire)) return d;
  pthread_mutex_lock(&load_lock);
  int rc = CUDA_SUCCESS, major = 0, minor = 0;
  CUdevice dev;
  if (!atomic_load_explicit(&d->ready, memory_order_relaxed)) {
    if ((rc = cu.DeviceGet(&dev, ordinal)) == CUDA_SUCCESS &&
        (rc = cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) == CUDA_SUCCESS &&
        (rc = cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) == CUDA_SUCCESS &&
        (rc = cu.DeviceGetAttribute(&d->max_shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                    dev)) == CUDA_SUCCESS &&
        (rc = cu.DeviceGetAttribute(&d->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev)) == CUDA_SUCCESS &&
        (rc = cu.DeviceGetName(d->name, (int)sizeof d->name, dev)) == CUDA_SUCCESS &&
        (rc = cu.DevicePrimaryCtxRetain(&d->context, dev)) == CUDA_SUCCESS) {
      d->capability = major * 10 + minor;
      atomic_store_explicit(&d->ready, 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&load_lock);
  if (rc != CUDA_SUCCESS) {
    char what[64];
    snprintf(what, sizeof what, "opening CUDA device %d", ordinal);
    cu_fail(err, rc, what);
    return NULL;
  }
  return d;
}

int aot_pointer_device(uint64_t ptr, const char *arg, aot_error *err) {
  if (driver(err) != 0) return -1;
  int ordinal = -1, memtype = 0;
  int rc = cu.PointerGetAttribute(&memtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)ptr);
  if (rc == CUDA_SUCCESS) rc = cu.PointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)ptr);
  if (rc != CUDA_SUCCESS || memtype == CU_MEMORYTYPE_HOST)
    return aot_fail(err, AOT_E_VALUE, "argument %s: 0x%" PRIx64 " is not a CUDA device pointer (%s)", arg, ptr,
                    rc != CUDA_SUCCESS ? cu_name(rc) : "host memory");
  return ordinal;
}

void aot_set_tensor(aot_call *call, int param, uint64_t ptr, int dtype, int ndim, const int64_t *shape,
                    const int64_t *strides) {
  aot_tensor *t = &call->t[param];
  t->ptr = ptr;
  t->dtype = dtype >= 0 && dtype < aot_num_dtypes ? dtype : -1;
  t->ndim = ndim >= 0 && ndim <= AOT_MAX_DIMS && shape != NULL ? ndim : -1;
  if (ndim > AOT_MAX_DIMS && call->err->status == AOT_OK) /* reported when the call is made */
    aot_fail(call->err, AOT_E_VALUE, "argument %s has %d dimensions; at most %d are supported",
             call->kernel->params[param].name, ndim, AOT_MAX_DIMS);
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    t->shape[d] = shape[d];
    t->strides[d] = strides != NULL ? strides[d] : expect;
    expect = aot_sat_mul(expect, shape[d]);
  }
  call->given |= UINT64_C(1) << param;
}

/* ---------------------------------------------------------------- scalars */

int32_t aot_f16_bits(double value) {
  uint64_t u;
  memcpy(&u, &value, sizeof u);
  uint32_t sign = (uint32_t)(u >> 48) & 0x8000;
  int exp = (int)(u >> 52 & 0x7ff);
  uint64_t mantissa = u & ((UINT64_C(1) << 52) - 1);
  if (exp == 0x7ff) return (int32_t)(sign | 0x7c00 | (mantissa ? 0x200 : 0)); /* inf, NaN */
  if (exp == 0) return (int32_t)sign; /* double subnormals are far below fp16's range */
  int e = exp - 1023 + 15;            /* fp16's biased exponent */
  uint64_t m = mantissa | UINT64_C(1) << 52;
  int shift = 42; /* keeps the implicit bit and 10 of the mantissa */
  if (e <= 0) shift += 1 - e, e = 0; /* subnormal */
  if (shift > 63) return (int32_t)sign;
  uint64_t kept = m >> shift, rest = m & ((UINT64_C(1) << shift) - 1), halfway = UINT64_C(1) << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1))) kept++; /* round to nearest even */
  if (e == 0) return (int32_t)(sign | (uint32_t)kept); /* a carry into bit 10 makes the smallest normal */
  if (kept >> 11) kept >>= 1, e++;
  if (e >= 31) return -1; /* too large for fp16 */
  return (int32_t)(sign | (uint32_t)e << 10 | (uint32_t)(kept & 0x3ff));
}

/* ---------------------------------------------------------------- expression helpers */

static int64_t expr_fail(aot_call *x, const char *what) {
  if (x->err->status == AOT_OK)
    aot_fail(x->err, AOT_E_VALUE, "%s(): %s", x->kernel->name, what);
  return 0;
}

/* Every operation of a launch expression is total: a result past int64 is an error, as is a division
 * by zero; none traps (INT64_MIN / -1 and INT64_MIN % -1 do, in C). */
static int64_t overflow(aot_call *x) {
  return expr_fail(x, "a launch expression overflows 64-bit integers; check the arguments");
}

int64_t aot_add(aot_call *x, int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? overflow(x) : r;
}

int64_t aot_sub(aot_call *x, int64_t a, int64_t b) {
  int64_t r;
  return __builtin_sub_overflow(a, b, &r) ? overflow(x) : r;
}

int64_t aot_mul(aot_call *x, int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? overflow(x) : r;
}

int64_t aot_neg(aot_call *x, int64_t a) { return aot_sub(x, 0, a); }

int64_t aot_floordiv(aot_call *x, int64_t a, int64_t b) {
  if (b == 0) return expr_fail(x, "division by zero in a launch expression; check the arguments");
  if (b == -1) return aot_neg(x, a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t aot_mod(aot_call *x, int64_t a, int64_t b) {
  if (b == 0) return expr_fail(x, "modulo by zero in a launch expression; check the arguments");
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

int64_t aot_cdiv(aot_call *x, int64_t a, int64_t b) {
  if (b == 0) return expr_fail(x, "division by zero in a launch expression; check the arguments");
  if (b == -1) return aot_neg(x, a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) == (b < 0))) ? q + 1 : q;
}

int64_t aot_next_pow2(aot_call *x, int64_t a) {
  (void)x;
  int64_t p = 1;
  while (p < a && p < (INT64_C(1) << 62)) p <<= 1;
  return p;
}

static const aot_tensor *shaped(aot_call *x, int param, const char *fn) {
  const aot_tensor *t = &x->t[param];
  if (t->ndim < 0) {
    if (x->err->status == AOT_OK)
      aot_fail(x->err, AOT_E_TYPE,
               "argument %s: %s() needs its shape, but it was passed as a raw pointer; pass a tensor or give "
               "the arguments computed from it explicitly",
               x->kernel->params[param].name, fn);
    return NULL;
  }
  return t;
}

int64_t aot_numel(aot_call *x, int param) {
  const aot_tensor *t = shaped(x, param, "numel");
  if (t == NULL) return 0;
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    if (__builtin_mul_overflow(n, t->shape[d], &n)) return overflow(x);
  return n;
}

static int64_t dim_of(aot_call *x, int param, int64_t dim, const char *fn, int strides) {
  const aot_tensor *t = shaped(x, param, fn);
  if (t == NULL) return 0;
  if (dim < 0 || dim >= t->ndim) {
    if (x->err->status == AOT_OK)
      aot_fail(x->err, AOT_E_VALUE, "argument %s: %s(%s, %" PRId64 ") needs a tensor of at least %" PRId64
               " dimensions, got %d", x->kernel->params[param].name, fn, x->kernel->params[param].name, dim,
               dim + 1, t->ndim);
    return 0;
  }
  return strides ? t->strides[dim] : t->shape[dim];
}

int64_t aot_size(aot_call *x, int param, int64_t dim) { return dim_of(x, param, dim, "size", 0); }
int64_t aot_stride(aot_call *x, int param, int64_t dim) { return dim_of(x, param, dim, "stride", 1); }

/* ---------------------------------------------------------------- choosing a variant */

static int bind_types(const aot_kernel *k, const aot_call *call, aot_error *err) {
  int bound[AOT_MAX_ARGS];
  int from[AOT_MAX_ARGS];
  for (int v = 0; v < k->ntypevars; v++) bound[v] = -1;
  for (int p = 0; p < k->nparams; p++) {
    const aot_param *prm = &k->params[p];
    int dtype = call->t[p].dtype;
    if (prm->kind != AOT_ARG_PTR || dtype < 0) continue;
    if (prm->typevar < 0) {
      if (dtype != prm->dtype)
        return aot_fail(err, AOT_E_TYPE, "argument %s: expected dtype %s, got %s", prm->name,
                        aot_dtype_names[prm->dtype], aot_dtype_names[dtype]);
    } else if (bound[prm->typevar] < 0) {
      bound[prm->typevar] = dtype;
      from[prm->typevar] = p;
    } else if (bound[prm->typevar] != dtype) {
      return aot_fail(err, AOT_E_TYPE, "argument %s: expected dtype %s (the dtype of %s), got %s", prm->name,
                      aot_dtype_names[bound[prm->typevar]], k->params[from[prm->typevar]].name,
                      aot_dtype_names[dtype]);
    }
  }
  for (int v = 0; v < k->ntypevars; v++) {
    if (bound[v] < 0)
      return aot_fail(err, AOT_E_TYPE,
                      "%s(): cannot tell the dtype %s from raw pointers; pass at least one tensor typed by %s",
                      k->name, k->typevar_names[v], k->typevar_names[v]);
  }
  for (int b = 0; b < k->nbindings; b++) {
    int match = 1;
    for (int v = 0; v < k->ntypevars; v++) match &= k->bindings[b * k->ntypevars + v] == bound[v];
    if (match) return b;
  }
  char have[256] = "";
  size_t off = 0;
  for (int v = 0; v < k->ntypevars && off < sizeof have; v++)
    off += (size_t)snprintf(have + off, sizeof have - off, "%s%s=%s", v ? ", " : "", k->typevar_names[v],
                            aot_dtype_names[bound[v]]);
  return aot_fail(err, AOT_E_TYPE, "%s(): no variant was built for %s; see %s.%s.__doc__ for the built dtypes",
                  k->name, have, k->package, k->name);
}

/* What the call's argument p is, in the terms Triton's JIT specializes on (aot_spec_state). Floats
 * and booleans are not specialized. */
static uint8_t call_state(const aot_kernel *k, const aot_call *call, int p) {
  const aot_param *prm = &k->params[p];
  if (call->none >> p & 1) return AOT_SPEC_NONE;
  if (prm->kind == AOT_ARG_PTR) return call->t[p].ptr % 16 == 0 ? AOT_SPEC_DIV16 : AOT_SPEC_ANY;
  if (prm->kind != AOT_ARG_I32 && prm->kind != AOT_ARG_I64 && prm->kind != AOT_ARG_U32 && prm->kind != AOT_ARG_U64)
    return AOT_SPEC_ANY;
  if (call->i[p] == 1) return AOT_SPEC_ONE;
  return (uint64_t)call->i[p] % 16 == 0 ? AOT_SPEC_DIV16 : AOT_SPEC_ANY;
}

/* What the JIT itself would key the argument on: the call's state where the JIT keys that argument
 * on it (not under do_not_specialize, say), else nothing. */
static uint8_t jit_state(const aot_kernel *k, const aot_call *call, int p) {
  uint8_t have = call_state(k, call, p);
  return k->params[p].jit_states >> have & 1 ? have : AOT_SPEC_ANY;
}

static const char spec_letter[] = {'_', 'D', '1', 'N'}; /* by aot_spec_state, as class names spell it */

/* Whether the call satisfies an argument's hint (16-divisible, or 1). */
static int hint_holds(const aot_kernel *k, const aot_call *call, int p) {
  const aot_param *prm = &k->params[p];
  return prm->hint == 0 || call_state(k, call, p) == (prm->hint == 1 ? AOT_SPEC_ONE : AOT_SPEC_DIV16);
}

/* The first argument whose value breaks what specialization class s assumes, or -1 (a NULL call:
 * assume it holds). */
static int spec_breaker(const aot_kernel *k, const aot_call *call, int s) {
  const uint8_t *want = &k->specs[(size_t)s * (size_t)k->nparams];
  for (int p = 0; call != NULL && p < k->nparams; p++) {
    uint8_t have = call_state(k, call, p);
    if (want[p] != have && (want[p] != AOT_SPEC_ANY || have == AOT_SPEC_NONE)) return p;
  }
  return -1;
}

static int spec_holds(const aot_kernel *k, const aot_call *call, int s) { return spec_breaker(k, call, s) < 0; }

/* The call's class: the first (most specialized) whose assumptions it satisfies. */
static int call_spec(const aot_kernel *k, const aot_call *call, aot_error *err) {
  for (int s = 0; s < k->nspecs; s++)
    if (spec_holds(k, call, s)) return s;
  for (int p = 0; p < k->nparams; p++)
    if (call->none >> p & 1)
      return aot_fail(err, AOT_E_VALUE, "argument %s: no variant was built for it being None; pass a tensor",
                      k->params[p].name);
  return aot_fail(err, AOT_E_VALUE, "%s(): no variant was built for this call's arguments", k->name);
}

static int check_call(const aot_kernel *k, aot_call *call) {
  for (int p = 0; p < k->nparams; p++) {
    const aot_param *prm = &k->params[p];
    if (call->none >> p & 1) continue;
    if (prm->required && !hint_holds(k, call, p)) {
      if (prm->hint == 1)
        return aot_fail(call->err, AOT_E_VALUE, "argument %s must be 1 (the kernel was built for that), got %" PRId64,
                        prm->name, call->i[p]);
      if (prm->kind == AOT_ARG_PTR)
        return aot_fail(call->err, AOT_E_VALUE, "argument %s must be 16-byte aligned (the kernel was built for that), "
                        "got address 0x%" PRIx64, prm->name, call->t[p].ptr);
      return aot_fail(call->err, AOT_E_VALUE, "argument %s must be a multiple of 16 (the kernel was built for that), "
                      "got %" PRId64, prm->name, call->i[p]);
    }
    if (prm->kind == AOT_ARG_I32 && (call->i[p] < INT32_MIN || call->i[p] > INT32_MAX))
      return aot_fail(call->err, AOT_E_VALUE, "argument %s = %" PRId64 " does not fit in i32", prm->name,
                      call->i[p]);
    if (prm->kind == AOT_ARG_U32 && (call->i[p] < 0 || call->i[p] > (int64_t)UINT32_MAX))
      return aot_fail(call->err, AOT_E_VALUE, "argument %s = %" PRId64 " does not fit in u32", prm->name,
                      call->i[p]);
    if (prm->kind == AOT_ARG_BOOL && call->i[p] != 0 && call->i[p] != 1)
      return aot_fail(call->err, AOT_E_VALUE, "argument %s = %" PRId64 " is not a boolean", prm->name, call->i[p]);
    if (prm->kind == AOT_ARG_F16 && aot_f16_bits(call->f[p]) < 0)
      return aot_fail(call->err, AOT_E_VALUE, "argument %s = %g does not fit in fp16", prm->name, call->f[p]);
  }
  int64_t need[AOT_MAX_ARGS];
  k->extents(call, need);
  if (call->err->status != AOT_OK) return -1;
  for (int p = 0; p < k->nparams; p++) {
    const aot_param *prm = &k->params[p];
    const aot_tensor *t = &call->t[p];
    if (prm->kind != AOT_ARG_PTR || t->ndim < 0) continue;
    int64_t numel = 1, span = 1, expect = 1, reach;
    int contiguous = 1, wraps = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (t->strides[d] < 0 || t->shape[d] < 0)
        return aot_fail(call->err, AOT_E_VALUE, "argument %s: negative strides or sizes are not supported",
                        prm->name);
      if (t->shape[d] != 1 && t->strides[d] != expect) contiguous = 0;
      wraps += __builtin_mul_overflow(numel, t->shape[d], &numel);
      wraps += __builtin_mul_overflow(t->shape[d] > 0 ? t->shape[d] - 1 : 0, t->strides[d], &reach);
      wraps += __builtin_add_overflow(span, reach, &span);
      wraps += __builtin_mul_overflow(expect, t->shape[d], &expect);
    }
    if (wraps)
      return aot_fail(call->err, AOT_E_VALUE, "argument %s: its shape and strides span more than 64-bit sizes",
                      prm->name);
    if (numel == 0) span = 0;
    if (prm->contiguous && !contiguous)
      return aot_fail(call->err, AOT_E_VALUE, "argument %s must be contiguous; call .contiguous() on it",
                      prm->name);
    if (need[p] > span)
      return aot_fail(call->err, AOT_E_VALUE,
                      "argument %s is too small: the kernel may touch %" PRId64 " elements from its start, "
                      "the tensor spans %" PRId64,
                      prm->name, need[p], span);
  }
  return 0;
}

/* A key value as the table holds it: pow2 buckets round up to a power of two; values up to 1 (0 is
 * often a flag) stay as they are. */
static int64_t bucket(const aot_kernel *k, int64_t v) {
  return k->pow2_buckets && v > 1 ? aot_next_pow2(NULL, v) : v;
}


/* log2 of x (x >= 1), exact at powers of two and linear in between: enough to rank distances. */
static double log2_approx(int64_t x) {
  if (x < 1) x = 1;
  int e = 63 - __builtin_clzll((unsigned long long)x);
  return e + (double)(x - (INT64_C(1) << e)) / (double)(INT64_C(1) << e);
}

/* A config's integer constexprs, as the grid and bound expressions read them. */
static const int64_t *config_consts(const aot_kernel *k, int config) {
  return &k->consts[(size_t)config * (size_t)k->nconsts];
}

/* Whether a config's bound constexprs have the values the call fixes (any config, without a call).
 * The values may depend on the config's other constexprs (a heuristic such as K % BLOCK_K == 0). */
static int config_fits(const aot_kernel *k, aot_call *call, int config) {
  if (call == NULL || k->nbound == 0) return 1;
  const int64_t *consts = config_consts(k, config);
  int64_t want[AOT_MAX_KEY];
  k->bound(call, consts, want);
  for (int b = 0; b < k->nbound; b++)
    if (consts[k->bound_consts[b]] != want[b]) return 0;
  return call->err->status == AOT_OK;
}

/* The config for a key. Among the table's rows for this arch, types and specialization (rows that
 * name them win over rows that do not): the nearest row at or above the bucketed key in every
 * dimension (the key rounds up); when no row is (the key is past the table), the nearest row (it
 * clamps). Nearness: the sum over dimensions of |log2(row value / key value)|. No row: the default. */
static int choose_config(const aot_kernel *k, aot_call *call, const int64_t *key, int target, int binding,
                         int spec, int *exact) {
  int64_t v[AOT_MAX_KEY];
  double v_log2[AOT_MAX_KEY];
  for (int d = 0; d < k->nkey; d++) v[d] = bucket(k, key[d]), v_log2[d] = log2_approx(v[d]);
  int best = -1, best_score = -1, best_up = 0;
  double best_dist = 0;
  for (int r = 0; r < k->nrules; r++) {
    const aot_rule *rule = &k->rules[r];
    /* a row for another class serves this call when the call satisfies that class (a less specialized
     * one: its tiles suit code that assumes less), but rows for the call's own class win */
    if ((rule->target >= 0 && rule->target != target) || (rule->binding >= 0 && rule->binding != binding) ||
        (rule->spec >= 0 && rule->spec != spec && !spec_holds(k, call, rule->spec)) ||
        !config_fits(k, call, rule->config))
      continue;
    int score = (rule->target >= 0) * 8 + (rule->binding >= 0) * 4 + (rule->spec == spec) * 2 + (rule->spec >= 0);
    int up = 1;
    double dist = 0;
    for (int d = 0; d < k->nkey; d++) {
      double gap = log2_approx(rule->key[d]) - v_log2[d];
      up &= rule->key[d] >= v[d];
      dist += gap < 0 ? -gap : gap;
    }
    if (best < 0 || score > best_score ||
        (score == best_score && (up > best_up || (up == best_up && dist < best_dist)))) {
      best = r, best_score = score, best_up = up, best_dist = dist;
    }
  }
  *exact = best >= 0 && best_up && best_dist == 0;
  return best >= 0 ? k->rules[best].config : k->default_config;
}

/* Machine code for exactly this chip; else the newest older machine code of the same major (sm_86
 * runs sm_80 code; 'a' code runs only on its own chip); else the newest PTX the chip can compile. */
static int choose_target(const aot_kernel *k, const device_state *d, aot_error *err) {
  int sass = -1, ptx = -1;
  for (int t = 0; t < k->ntargets; t++) {
    const aot_target *tg = &k->targets[t];
    int fits = tg->capability == d->capability || (!tg->specific && tg->capability < d->capability);
    if (!fits) continue;
    if (tg->ptx) {
      if (ptx < 0 || tg->capability > k->targets[ptx].capability) ptx = t;
    } else if (tg->capability == d->capability) {
      return t;
    } else if (tg->capability / 10 == d->capability / 10 && (sass < 0 || tg->capability > k->targets[sass].capability)) {
      sass = t;
    }
  }
  if (sass >= 0) return sass;
  if (ptx >= 0) return ptx;
  char have[256] = "";
  size_t off = 0;
  for (int t = 0; t < k->ntargets && off < sizeof have; t++)
    off += (size_t)snprintf(have + off, sizeof have - off, "%s%s", t ? ", " : "", k->targets[t].id);
  return aot_fail(err, AOT_E_CUDA,
                  "%s(): the GPU (%s) has compute capability %d.%d, but %s was built for %s; rebuild with a "
                  "target for this GPU",
                  k->name, d->name, d->capability / 10, d->capability % 10, k->package, have);
}

/* Per specialization class, the variant built for this binding, config and target (-1: none). */
static const int *class_slots(const aot_kernel *k, int binding, int config, int target) {
  return &k->variant_of[((size_t)(binding * k->nconfigs + config) * (size_t)k->ntargets + (size_t)target) *
                        (size_t)k->nspecs];
}

/* The variant of a config for this call: the most specialized class built whose assumptions the call
 * satisfies (classes are ordered; the least specialized assumes nothing and is always tried last). */
static int variant_in_config(const aot_kernel *k, aot_call *call, int config, int target, int binding,
                             int first_spec) {
  const int *slots = class_slots(k, binding, config, target);
  for (int s = first_spec; s < k->nspecs; s++)
    if (slots[s] >= 0 && spec_holds(k, call, s)) return slots[s];
  return -1;
}

/* The variant for a key: the table's config, else the default, else the first config that fits the
 * call and compiled for this target. */
static int variant_of_config(const aot_kernel *k, aot_call *call, int config, int target, int binding,
                             int first_spec, aot_error *err) {
  int fits = 0;
  for (int attempt = -2; attempt < k->nconfigs; attempt++) {
    int c = attempt == -2 ? config : attempt == -1 ? k->default_config : attempt;
    if (!config_fits(k, call, c)) continue;
    fits = 1;
    int v = variant_in_config(k, call, c, target, binding, first_spec);
    if (v >= 0) return v;
  }
  if (!fits) {
    char have[256] = "";
    size_t off = 0;
    int64_t want[AOT_MAX_KEY];
    k->bound(call, config_consts(k, k->default_config), want);
    for (int b = 0; b < k->nbound && off < sizeof have; b++)
      off += (size_t)snprintf(have + off, sizeof have - off, "%s%s = %" PRId64, b ? ", " : "", k->bound_names[b],
                              want[b]);
    return aot_fail(err, AOT_E_VALUE, "%s(): this call needs %s, for which no variant was built; see %s.%s.__doc__",
                    k->name, have, k->package, k->name);
  }
  return aot_fail(err, AOT_E_CUDA, "%s(): no variant of %s compiled for %s; see the build log", k->name, k->name,
                  k->targets[target].id);
}

/* ---------------------------------------------------------------- runtime autotuning (opt-in)
 * For kernels the recipe marks `autotune: true`, once enabled: a key with no exact row in the table
 * is timed over every config on first sight (not while the stream captures a graph), and the winner
 * is remembered per process. Per bucket (AOT_TUNE_BUCKET), keys in one bucket of the recipe share
 * the winner; per key (AOT_TUNE_KEY), each distinct key value is timed, as @triton.autotune does.
 * The package's Python side saves and loads these to a cache file. */

static atomic_int autotune_mode; /* aot_tune_mode */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

void aot_autotune_enable(int mode) { atomic_store(&autotune_mode, mode); }

static int memo_same(const aot_tuned *a, const aot_tuned *b, int nkey) {
  if (a->target != b->target || a->binding != b->binding || a->spec != b->spec) return 0;
  for (int d = 0; d < nkey; d++)
    if (a->key[d] != b->key[d]) return 0;
  return 1;
}

static int memo_find(const aot_kernel *k, const aot_tuned *want) {
  int config = -1;
  pthread_mutex_lock(&memo_lock);
  for (int i = 0; i < k->memo->n && config < 0; i++)
    if (memo_same(&k->memo->items[i], want, k->nkey)) config = k->memo->items[i].config;
  pthread_mutex_unlock(&memo_lock);
  return config;
}

int aot_memo_put(const aot_kernel *k, const aot_tuned *entry) {
  int rc = 0;
  pthread_mutex_lock(&memo_lock);
  aot_memo *m = k->memo;
  int i = 0;
  while (i < m->n && !memo_same(&m->items[i], entry, k->nkey)) i++;
  if (i == m->cap) {
    int cap;
    size_t bytes;
    aot_tuned *grown = NULL;
    if (!__builtin_mul_overflow(m->cap ? m->cap : 8, 2, &cap) &&
        !__builtin_mul_overflow((size_t)cap, sizeof *grown, &bytes))
      grown = realloc(m->items, bytes);
    if (grown == NULL) rc = -1;
    else m->items = grown, m->cap = cap;
  }
  if (rc == 0) {
    m->items[i] = *entry;
    if (i == m->n) m->n++;
  }
  pthread_mutex_unlock(&memo_lock);
  return rc;
}

int aot_memo_get(const aot_kernel *k, int i, aot_tuned *out) {
  pthread_mutex_lock(&memo_lock);
  int ok = i >= 0 && i < k->memo->n;
  if (ok) *out = k->memo->items[i];
  pthread_mutex_unlock(&memo_lock);
  return ok ? 0 : -1;
}

typedef struct {
  aot_tuned point; /* the call's target, binding, specialization and bucketed key */
  int untuned;     /* the key is past the table, and autotuning may time it */
  int miss;        /* the pick's class miss (class_miss: index + 1, 0, or -1), or -2: not known yet */
} choice;

static int launch_variant(const aot_kernel *k, aot_call *call, int v, int ordinal, device_state *d, aot_stream stream);

/* What a timing run needs: two events, and a buffer twice the L2 cache whose clearing before each run
 * evicts the inputs, so that every config is timed from memory as in a real call (and as Triton's
 * autotuner times them). */
typedef struct {
  CUevent start, stop;
  CUdeviceptr flush;
  size_t flush_bytes;
} timer;

static int timer_open(timer *t, const device_state *d, aot_error *err) {
  int rc;
  t->flush_bytes = 2 * (size_t)(d->l2_bytes > 0 ? d->l2_bytes : 0);
  if ((rc = cu.EventCreate(&t->start, 0)) != CUDA_SUCCESS || (rc = cu.EventCreate(&t->stop, 0)) != CUDA_SUCCESS)
    return cu_fail(err, rc, "autotune: cuEventCreate");
  if (t->flush_bytes > 0 && (rc = cu.MemAlloc(&t->flush, t->flush_bytes)) != CUDA_SUCCESS)
    return cu_fail(err, rc, "autotune: allocating the buffer that clears the L2 cache (cuMemAlloc)");
  return 0;
}

/* Release what timer_open made; a failure is reported unless the call failed already. */
static void timer_close(timer *t, aot_error *err) {
  int rc[3] = {t->start ? cu.EventDestroy(t->start) : CUDA_SUCCESS, t->stop ? cu.EventDestroy(t->stop) : CUDA_SUCCESS,
               t->flush ? cu.MemFree(t->flush) : CUDA_SUCCESS};
  for (int i = 0; i < 3; i++)
    if (rc[i] != CUDA_SUCCESS && err->status == AOT_OK)
      cu_fail(err, rc[i], "autotune: releasing its events and L2-clearing buffer (cuEventDestroy, cuMemFree)");
}

static int timed_ms(const timer *t, aot_stream stream, float *ms, const aot_kernel *k, aot_call *call, int v,
                    int ordinal, device_state *d) {
  int rc;
  if (t->flush && (rc = cu.MemsetD8Async(t->flush, 0, t->flush_bytes, stream)) != CUDA_SUCCESS)
    return cu_fail(call->err, rc, "autotune: clearing the L2 cache (cuMemsetD8Async)");
  if ((rc = cu.EventRecord(t->start, stream)) != CUDA_SUCCESS)
    return cu_fail(call->err, rc, "autotune: cuEventRecord");
  if (launch_variant(k, call, v, ordinal, d, stream) != 0) return -1;
  if ((rc = cu.EventRecord(t->stop, stream)) != CUDA_SUCCESS || (rc = cu.EventSynchronize(t->stop)) != CUDA_SUCCESS ||
      (rc = cu.EventElapsedTime(ms, t->start, t->stop)) != CUDA_SUCCESS)
    return cu_fail(call->err, rc, "autotune: timing with CUDA events");
  return 0;
}

static int by_time(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* The median time of a variant: 2 warm-ups, then as many runs as fit in about 10 ms of GPU time
 * (at least 5, at most 64). */
static int median_ms(const timer *t, aot_stream stream, float *median, const aot_kernel *k, aot_call *call, int v,
                     int ordinal, device_state *d) {
  enum { WARMUP = 2, MIN_REPS = 5, MAX_REPS = 64 };
  const float budget_ms = 10.0f;
  float times[MAX_REPS], ms = 0;
  for (int rep = 0; rep < WARMUP; rep++)
    if (timed_ms(t, stream, &ms, k, call, v, ordinal, d) != 0) return -1;
  int reps = ms > budget_ms / MAX_REPS ? (int)(budget_ms / ms) : MAX_REPS;
  if (reps < MIN_REPS) reps = MIN_REPS;
  for (int rep = 0; rep < reps; rep++)
    if (timed_ms(t, stream, &times[rep], k, call, v, ordinal, d) != 0) return -1;
  qsort(times, (size_t)reps, sizeof *times, by_time);
  *median = times[reps / 2];
  return 0;
}

/* Triton's launch syntax: the caller's config, in exactly the class the JIT computes for the call
 * (a less specialized variant would run it, but it is not the code the JIT would run). */
static int exact_variant(const aot_kernel *k, aot_call *call, int config, int target, int binding) {
  const int *slots = class_slots(k, binding, config, target);
  for (int s = 0; s < k->nspecs; s++) {
    const uint8_t *want = &k->specs[(size_t)s * (size_t)k->nparams];
    int same = slots[s] >= 0;
    for (int p = 0; same && p < k->nparams; p++) same = k->params[p].launch_only || want[p] == jit_state(k, call, p);
    if (same) return slots[s];
  }
  char have[AOT_MAX_ARGS + 1];
  int n = 0;
  for (int p = 0; p < k->nparams; p++)
    if (!k->params[p].launch_only) have[n++] = spec_letter[jit_state(k, call, p)];
  have[n] = '\0';
  return aot_fail(call->err, AOT_E_MISSING, "%s[grid](...): no variant was built for config %s in class %s (the "
                  "JIT's specialization of this call, one letter per argument); record a run that makes this "
                  "call, or allow the JIT fallback", k->name, k->config_labels[config], have);
}

/* Time every config and remember the fastest; returns its variant. */
static int autotune(const aot_kernel *k, aot_call *call, int ordinal, device_state *d, aot_stream stream,
                    choice *c) {
  CUcontext popped;
  timer t = {0};
  int rc = cu.CtxPushCurrent(d->context);
  if (rc != CUDA_SUCCESS) return cu_fail(call->err, rc, "making the device's context current");
  int best_v = -1, best_config = -1;
  float best_ms = 0;
  if (timer_open(&t, d, call->err) == 0) {
    for (int config = 0; config < k->nconfigs && call->err->status == AOT_OK; config++) {
      if (!config_fits(k, call, config)) continue;
      int v = variant_in_config(k, call, config, c->point.target, c->point.binding, c->point.spec);
      float ms;
      if (v < 0 || median_ms(&t, stream, &ms, k, call, v, ordinal, d) != 0) continue;
      if (best_v < 0 || ms < best_ms) best_v = v, best_config = config, best_ms = ms;
    }
  }
  timer_close(&t, call->err);
  if ((rc = cu.CtxPopCurrent(&popped)) != CUDA_SUCCESS && call->err->status == AOT_OK)
    cu_fail(call->err, rc, "restoring the caller's context (cuCtxPopCurrent)");
  if (call->err->status != AOT_OK) return -1;
  c->point.config = best_config;
  if (best_v >= 0 && aot_memo_put(k, &c->point) != 0) return aot_fail(call->err, AOT_E_CUDA, "out of memory");
  return best_v >= 0 ? best_v : aot_fail(call->err, AOT_E_CUDA, "%s(): autotune found no variant to time", k->name);
}

static int variant_for(const aot_kernel *k, const int64_t *key, int target, int binding, aot_error *err) {
  int exact;
  return variant_of_config(k, NULL, choose_config(k, NULL, key, target, binding, 0, &exact), target, binding, 0, err);
}

/* ---------------------------------------------------------------- class misses
 * A call that runs a less specialized class than Triton's JIT would have compiled for it (some argument
 * the JIT would key as 16-divisible or 1 is assumed nothing) is a class miss: counted per pair of the
 * class run and the JIT's class, so that the package can say which classes to add to its recipe. */

/* The JIT's state of each parameter, 2 bits each; whether variant v's class assumes less than it. */
static int jit_class(const aot_kernel *k, const aot_call *call, int v, uint64_t jit[2]) {
  const uint8_t *ran = &k->specs[(size_t)k->variants[v].spec * (size_t)k->nparams];
  int miss = 0;
  jit[0] = jit[1] = 0;
  for (int p = 0; p < k->nparams; p++) {
    if (k->params[p].launch_only) continue;
    uint8_t want = call->none >> p & 1 ? AOT_SPEC_NONE : jit_state(k, call, p);
    jit[p / 32] |= (uint64_t)want << (2 * (p % 32));
    miss |= (want == AOT_SPEC_DIV16 || want == AOT_SPEC_ONE) && ran[p] == AOT_SPEC_ANY;
  }
  return miss;
}

/* The class miss of launching variant v for this call: its index + 1 (made on first sight), 0 when v's
 * class is the JIT's, or -1 when the table of pairs is full. */
static int class_miss(const aot_kernel *k, const aot_call *call, int v) {
  uint64_t jit[2];
  if (!jit_class(k, call, v, jit)) return 0;
  int spec = k->variants[v].spec, found = -1;
  aot_memo *m = k->memo;
  pthread_mutex_lock(&memo_lock);
  for (int i = 0; i < m->nmisses && found < 0; i++)
    if (m->misses[i].spec == spec && m->misses[i].jit[0] == jit[0] && m->misses[i].jit[1] == jit[1]) found = i;
  if (found < 0 && m->nmisses < AOT_MISSES) {
    found = m->nmisses++;
    m->misses[found].spec = spec, m->misses[found].jit[0] = jit[0], m->misses[found].jit[1] = jit[1];
  }
  pthread_mutex_unlock(&memo_lock);
  return found < 0 ? -1 : found + 1;
}

static void count_miss(const aot_kernel *k, aot_call *call, int miss) {
  if (miss < 0)
    atomic_fetch_add_explicit(&k->memo->lost_misses, 1, memory_order_relaxed);
  else if (miss > 0 && atomic_fetch_add_explicit(&k->memo->misses[miss - 1].calls, 1, memory_order_relaxed) == 0)
    call->new_miss = miss;
}

int aot_miss_get(const aot_kernel *k, int i, int *spec, char *jit, uint64_t *calls, uint64_t *lost) {
  if (lost != NULL) *lost = atomic_load_explicit(&k->memo->lost_misses, memory_order_relaxed);
  pthread_mutex_lock(&memo_lock);
  int ok = i >= 0 && i < k->memo->nmisses;
  if (ok) {
    const aot_miss *m = &k->memo->misses[i];
    int n = 0;
    for (int p = 0; p < k->nparams; p++)
      if (k->spec_letters >> p & 1) jit[n++] = spec_letter[m->jit[p / 32] >> (2 * (p % 32)) & 3];
    jit[n] = '\0';
    *spec = m->spec;
    *calls = atomic_load_explicit(&m->calls, memory_order_relaxed);
  }
  pthread_mutex_unlock(&memo_lock);
  return ok ? 0 : -1;
}

/* ---------------------------------------------------------------- the last picks
 * Without constexprs bound to the call and without runtime tuning, the variant a call gets depends
 * only on its target, types, argument states and bucketed key (the table search reads nothing else), so
 * a kernel keeps its last few picks (aot_pick) and a repeated call skips the search. Every check of
 * the call has run before the lookup. */

typedef struct {
  int32_t target, binding;
  uint64_t states[2];
  int64_t key[AOT_MAX_KEY];
  aot_pick *slot;
} pick_point;

static void pick_point_of(const aot_kernel *k, const aot_call *call, int target, int binding, const int64_t *key,
                          pick_point *pt) {
  pt->target = target, pt->binding = binding, pt->states[0] = pt->states[1] = 0;
  for (int p = 0; p < k->nparams; p++) pt->states[p / 32] |= (uint64_t)call_state(k, call, p) << (2 * (p % 32));
  uint64_t h = (uint64_t)(target * 31 + binding) ^ pt->states[0] * 0x9E3779B97F4A7C15u ^ pt->states[1];
  for (int d = 0; d < k->nkey; d++) pt->key[d] = bucket(k, key[d]), h = (h ^ (uint64_t)pt->key[d]) * 0x100000001B3u;
  pt->slot = &k->memo->picks[(h ^ h >> 32) % AOT_PICKS];
}

static int pick_find(const aot_kernel *k, const pick_point *pt, int *miss) {
  aot_pick *s = pt->slot;
  uint32_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
  if (seq == 0 || seq & 1) return -1; /* never written, or being written */
  int same = atomic_load_explicit(&s->target, memory_order_relaxed) == pt->target &&
             atomic_load_explicit(&s->binding, memory_order_relaxed) == pt->binding &&
             atomic_load_explicit(&s->states[0], memory_order_relaxed) == pt->states[0] &&
             atomic_load_explicit(&s->states[1], memory_order_relaxed) == pt->states[1];
  for (int d = 0; same && d < k->nkey; d++) same = atomic_load_explicit(&s->key[d], memory_order_relaxed) == pt->key[d];
  int v = atomic_load_explicit(&s->variant, memory_order_relaxed);
  int m = atomic_load_explicit(&s->miss, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (!same || atomic_load_explicit(&s->seq, memory_order_relaxed) != seq) return -1;
  *miss = m;
  return v;
}

static void pick_keep(const aot_kernel *k, const pick_point *pt, int v, int miss) {
  aot_pick *s = pt->slot;
  uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
  if (seq & 1 || !atomic_compare_exchange_strong(&s->seq, &seq, seq + 1)) return; /* another thread writes it */
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&s->target, pt->target, memory_order_relaxed);
  atomic_store_explicit(&s->binding, pt->binding, memory_order_relaxed);
  atomic_store_explicit(&s->states[0], pt->states[0], memory_order_relaxed);
  atomic_store_explicit(&s->states[1], pt->states[1], memory_order_relaxed);
  for (int d = 0; d < k->nkey; d++) atomic_store_explicit(&s->key[d], pt->key[d], memory_order_relaxed);
  atomic_store_explicit(&s->variant, v, memory_order_relaxed);
  atomic_store_explicit(&s->miss, miss, memory_order_relaxed);
  atomic_store_explicit(&s->seq, seq + 2 == 0 ? 2 : seq + 2, memory_order_release);
}

static int choose(const aot_kernel *k, aot_call *call, const device_state *d, int forced, choice *c) {
  aot_error *err = call->err;
  if (err->status != AOT_OK) return -1; /* filling the call failed (aot_set_tensor) */
  int binding = bind_types(k, call, err);
  if (binding < 0) return -1;
  k->defaults(call);
  if (err->status != AOT_OK || check_call(k, call) != 0) return -1;
  if (k->nbound > 0) { /* evaluated once here so that a failing expression is reported, not taken as a misfit */
    int64_t want[AOT_MAX_KEY];
    k->bound(call, config_consts(k, k->default_config), want);
    if (err->status != AOT_OK) return -1;
  }
  int target = choose_target(k, d, err);
  if (target < 0) return -1;
  if (forced >= 0) {
    const aot_variant *var = &k->variants[forced];
    if (var->binding != binding)
      return aot_fail(err, AOT_E_TYPE, "variant %s does not take this call's dtypes", var->id);
    if (var->target != target)
      return aot_fail(err, AOT_E_VALUE, "variant %s is not the code for this GPU (%s, which runs %s code)", var->id,
                      d->name, k->targets[target].id);
    if (!config_fits(k, call, var->config))
      return aot_fail(err, AOT_E_VALUE, "variant %s was built for other values of the constexprs this call fixes; "
                      "leave variant= out, or pick one from %s.%s.variants", var->id, k->package, k->name);
    int p = spec_breaker(k, call, var->spec);
    if (p >= 0) {
      static const char *const what[] = {"not None", "16-divisible (16-byte aligned)", "equal to 1", "None"};
      uint8_t want = k->specs[(size_t)var->spec * (size_t)k->nparams + (size_t)p];
      return aot_fail(err, AOT_E_VALUE, "variant %s assumes argument %s is %s (class %s), and this call's is not; "
                      "pass a less specialized variant", var->id, k->params[p].name, what[want],
                      k->spec_names[var->spec]);
    }
    return forced;
  }
  if (call->launch_config > 0) return exact_variant(k, call, call->launch_config - 1, target, binding);
  int64_t key[AOT_MAX_KEY];
  k->key(call, key);
  if (err->status != AOT_OK) return -1;
  int mode = k->autotune ? atomic_load(&autotune_mode) : AOT_TUNE_OFF;
  pick_point point;
  int keep = k->nbound == 0 && mode == AOT_TUNE_OFF; /* nothing but the point decides the pick */
  if (keep) {
    pick_point_of(k, call, target, binding, key, &point);
    int v = pick_find(k, &point, &c->miss);
    if (v >= 0) return v;
  }
  int spec = call_spec(k, call, err), exact;
  if (spec < 0) return -1;
  int config = choose_config(k, call, key, target, binding, spec, &exact);
  if (keep) {
    int v = variant_of_config(k, call, config, target, binding, spec, err);
    if (v >= 0) pick_keep(k, &point, v, c->miss = class_miss(k, call, v));
    return v;
  }
  for (int dim = 0; dim < k->nkey && mode == AOT_TUNE_KEY; dim++)
    if (bucket(k, key[dim]) != key[dim]) exact = 0; /* the table's row is for the bucket, not this key */
  if (!exact && mode != AOT_TUNE_OFF) {
    c->point.target = target, c->point.binding = binding, c->point.spec = spec, c->point.config = -1;
    for (int dim = 0; dim < k->nkey; dim++) c->point.key[dim] = mode == AOT_TUNE_KEY ? key[dim] : bucket(k, key[dim]);
    int tuned = memo_find(k, &c->point);
    if (tuned >= 0) config = tuned;
    c->untuned = tuned < 0;
  }
  return variant_of_config(k, call, config, target, binding, spec, err);
}

int aot_choose_key(const aot_kernel *k, const int64_t *key, int binding, int ordinal, aot_error *err) {
  device_state *d = device(ordinal, err);
  if (d == NULL) return -1;
  if (binding < 0 || binding >= k->nbindings) return aot_fail(err, AOT_E_VALUE, "%s(): no such types", k->name);
  int target = choose_target(k, d, err);
  return target < 0 ? -1 : variant_for(k, key, target, binding, err);
}

int aot_select(const aot_kernel *k, aot_call *call, int device_ordinal, int forced) {
  call->kernel = k;
  device_state *d = device(device_ordinal, call->err);
  choice c = {.untuned = 0, .miss = -2};
  return d == NULL ? -1 : choose(k, call, d, forced, &c);
}

int aot_find_variant(const aot_kernel *k, const char *id, aot_error *err) {
  for (int v = 0; v < k->nvariants; v++)
    if (strcmp(k->variants[v].id, id) == 0) return v;
  return aot_fail(err, AOT_E_VALUE, "%s(): no variant %s; the package's __aotpack__ manifest lists them", k->name,
                  id);
}

/* ---------------------------------------------------------------- loading and launching */

/* An LZ4 length: the 4 bits of the token, and while they (then each added byte) are all ones, one more
 * byte; -1 past the end of the input. */
static int lz4_length(const unsigned char *src, size_t size, size_t *pos, size_t *length) {
  if (*length != 15) return 0;
  unsigned char byte;
  do {
    if (*pos >= size) return -1;
    byte = src[(*pos)++];
    *length += byte;
  } while (byte == 255);
  return 0;
}

int aot_lz4_decode(const unsigned char *src, size_t src_size, unsigned char *dst, size_t want) {
  size_t in = 0, out = 0;
  while (out < want) {
    if (in >= src_size) return -1;
    unsigned char token = src[in++];
    size_t literals = token >> 4, length = token & 15;
    if (lz4_length(src, src_size, &in, &literals) != 0 || literals > src_size - in) return -1;
    size_t take = literals < want - out ? literals : want - out;
    if (take <= 16 && src_size - in >= 16 && want - out >= 16)
      memcpy(dst + out, src + in, 16); /* a short run: one fixed-size copy (the excess is rewritten later) */
    else
      memcpy(dst + out, src + in, take);
    in += literals, out += take;
    if (out == want) break;
    if (src_size - in < 2) return -1; /* the last sequence has no match: the block ended short */
    size_t offset = (size_t)src[in] | (size_t)src[in + 1] << 8;
    in += 2;
    if (offset == 0 || offset > out || lz4_length(src, src_size, &in, &length) != 0) return -1;
    length += 4;
    if (length > want - out) length = want - out;
    unsigned char *to = dst + out, *from = to - offset;
    out += length;
    if (offset >= 8 && want - out >= 8) { /* 8 bytes at a time; each read is written before it is reached */
      for (size_t i = 0; i < length; i += 8) memcpy(to + i, from + i, 8);
    } else {
      for (size_t i = 0; i < length; i++) to[i] = from[i]; /* overlapping copies repeat */
    }
  }
  return 0;
}

/* CRC-32 (zlib's), eight bytes per step ("slicing by 8"); the tables are built once per process. */
static uint32_t crc_tables[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; bit++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_tables[0][i] = c;
  }
  for (int k = 1; k < 8; k++)
    for (int i = 0; i < 256; i++)
      crc_tables[k][i] = (crc_tables[k - 1][i] >> 8) ^ crc_tables[0][crc_tables[k - 1][i] & 0xFF];
}

static uint32_t word(const unsigned char *p) { /* little-endian, whatever the host */
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc32(const unsigned char *data, size_t size) {
  pthread_once(&crc_once, crc_init);
  const uint32_t(*t)[256] = (const uint32_t(*)[256])crc_tables;
  uint32_t c = 0xFFFFFFFFu;
  for (; size >= 8; data += 8, size -= 8) {
    uint32_t one = c ^ word(data), two = word(data + 4);
    c = t[7][one & 0xFF] ^ t[6][(one >> 8) & 0xFF] ^ t[5][(one >> 16) & 0xFF] ^ t[4][one >> 24] ^ t[3][two & 0xFF] ^
        t[2][(two >> 8) & 0xFF] ^ t[1][(two >> 16) & 0xFF] ^ t[0][two >> 24];
  }
  for (; size > 0; data++, size--) c = t[0][(c ^ *data) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

int aot_unpack(const aot_variant *var, unsigned char *dst, aot_error *err) {
  const aot_block *block = var->block;
  size_t end = (size_t)var->offset + var->raw_size; /* only the block's bytes up to the image's end */
  unsigned char *raw = end <= block->raw_size ? malloc(end ? end : 1) : NULL;
  int ok = raw != NULL && aot_lz4_decode(block->data, block->size, raw, end) == 0 &&
           crc32(raw + var->offset, var->raw_size) == var->crc32;
  if (ok) memcpy(dst, raw + var->offset, var->raw_size), dst[var->raw_size] = 0;
  free(raw);
  if (ok) return 0;
  return aot_fail(err, AOT_E_CUDA, "%s: its kernel image %s; reinstall the package", var->id,
                  raw == NULL && end <= block->raw_size ? "does not fit in memory" : "is damaged (CRC-32 mismatch)");
}

static CUfunction function(const aot_kernel *k, int v, int ordinal, const device_state *d, aot_error *err) {
  void *_Atomic *slot = &k->functions[(size_t)v * AOT_MAX_DEVICES + (size_t)ordinal];
  CUfunction fn = (CUfunction)atomic_load_explicit(slot, memory_order_acquire);
  if (fn != NULL) return fn;
  const aot_variant *var = &k->variants[v];
  if (driver_version < var->min_driver) {
    aot_fail(err, AOT_E_CUDA,
             "the NVIDIA driver supports CUDA %d.%d, but %s needs a driver for CUDA %d.%d or newer; update the "
             "driver",
             driver_version / 1000, driver_version % 1000 / 10, var->id, var->min_driver / 1000,
             var->min_driver % 1000 / 10);
    return NULL;
  }
  int64_t shared = (int64_t)var->shared + var->static_shared; /* two 32-bit sizes: no overflow in 64 bits */
  if (shared > d->max_shared_optin) {
    aot_fail(err, AOT_E_CUDA, "%s needs %" PRId64 " bytes of shared memory; %s allows %d per block", var->id, shared,
             d->name, d->max_shared_optin);
    return NULL;
  }
  /* Opt in to more than 48 KB of dynamic shared memory: the fixed amount (Triton), or all the chip
   * allows beside the static part when the recipe computes it per call (CUDA). */
  int dynamic_max = k->shared != NULL ? d->max_shared_optin - (int)var->static_shared : (int)var->shared;
  pthread_mutex_lock(&load_lock);
  fn = (CUfunction)atomic_load_explicit(slot, memory_order_relaxed);
  if (fn == NULL) {
    CUmodule module = NULL;
    CUcontext popped;
    int rc = cu.CtxPushCurrent(d->context);
    if (rc != CUDA_SUCCESS) {
      cu_fail(err, rc, "making the device's context current");
    } else {
      char what[512];
      unsigned char *image = malloc((size_t)var->raw_size + 1);
      if (image == NULL) {
        aot_fail(err, AOT_E_CUDA, "%s: its kernel image does not fit in memory", var->id);
      } else if (aot_unpack(var, image, err) != 0) {
        /* err says why */
      } else if ((rc = cu.ModuleLoadData(&module, image)) != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "loading %s on device %d (%s)", var->id, ordinal, d->name);
        cu_fail(err, rc, what);
      } else if ((rc = cu.ModuleGetFunction(&fn, module, var->entry)) != CUDA_SUCCESS) {
        snprintf(what, sizeof what, "finding %s in %s", var->entry, var->id);
        cu_fail(err, rc, what);
        fn = NULL;
      } else if (dynamic_max > 48 * 1024 &&
                 (rc = cu.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_max)) !=
                     CUDA_SUCCESS) {
        snprintf(what, sizeof what, "allowing %d bytes of shared memory for %s", dynamic_max, var->id);
        cu_fail(err, rc, what);
        fn = NULL;
      } else if (var->num_ctas > 8 &&
                 (rc = cu.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)) !=
                     CUDA_SUCCESS) {
        snprintf(what, sizeof what, "allowing clusters of %d blocks for %s", var->num_ctas, var->id);
        cu_fail(err, rc, what);
        fn = NULL;
      } else {
        atomic_store_explicit(slot, (void *)fn, memory_order_release);
      }
      /* a failed load leaves nothing behind; an unload that fails too is not reported over the load's error,
       * which is the one to fix (at worst the module stays loaded) */
      if (fn == NULL && module != NULL) cu.ModuleUnload(module);
      free(image); /* the driver keeps its own copy of a loaded module */
      if ((rc = cu.CtxPopCurrent(&popped)) != CUDA_SUCCESS && fn != NULL) {
        cu_fail(err, rc, "restoring the caller's context (cuCtxPopCurrent)");
        fn = NULL; /* the loaded function stays in its slot for the next call */
      }
    }
  }
  pthread_mutex_unlock(&load_lock);
  return fn;
}

int aot_launch(const aot_kernel *k, aot_call *call, int ordinal, aot_stream stream, int forced) {
  call->kernel = k;
  device_state *d = device(ordinal, call->err);
  if (d == NULL) return -1;
  choice c = {.untuned = 0, .miss = -2};
  int v = choose(k, call, d, forced, &c), capturing = 0, rc;
  /* time the configs, unless the stream captures a graph (timing synchronizes the stream, which a capture forbids) */
  if (v >= 0 && c.untuned) {
    if ((rc = cu.StreamIsCapturing(stream, &capturing)) != CUDA_SUCCESS)
      return cu_fail(call->err, rc, "asking whether the stream captures a graph (cuStreamIsCapturing)");
    if (!capturing) v = autotune(k, call, ordinal, d, stream, &c), c.miss = -2;
  }
  if (v < 0) return -1;
  if (forced < 0 && call->launch_config == 0) /* the dispatcher chose: was it the JIT's class? */
    count_miss(k, call, c.miss == -2 ? class_miss(k, call, v) : c.miss);
  return launch_variant(k, call, v, ordinal, d, stream);
}

/* ---------------------------------------------------------------- what a launch needs beyond grid and block */

static int missing_entry(aot_error *err, const char *symbol, const aot_variant *var) {
  return aot_fail(err, AOT_E_CUDA, "%s needs %s, which this NVIDIA driver (CUDA %d.%d) lacks; update the driver",
                  var->id, symbol, driver_version / 1000, driver_version % 1000 / 10);
}

/* Global scratch comes from a memory pool of aotpack's own per device, allocated and freed in stream
 * order around each launch that needs it: reuse across streams is the pool's business (it orders
 * it), and under graph capture the allocation becomes a node the graph owns, so a replay never
 * shares it with eager calls or other graphs. The pool keeps what it has (release threshold:
 * unlimited), so after the first calls an allocation is a cheap bookkeeping step. */
static void *scratch_pool(device_state *d, int ordinal, const aot_variant *var, aot_error *err) {
  void *pool = atomic_load_explicit(&d->scratch_pool, memory_order_acquire);
  if (pool != NULL) return pool;
  if (cu.MemPoolCreate == NULL || cu.MemPoolSetAttribute == NULL || cu.MemPoolDestroy == NULL ||
      cu.MemAllocFromPoolAsync == NULL || cu.MemFreeAsync == NULL) {
    missing_entry(err, "the stream-ordered allocator (cuMemPoolCreate)", var);
    return NULL;
  }
  pthread_mutex_lock(&load_lock);
  pool = atomic_load_explicit(&d->scratch_pool, memory_order_relaxed);
  if (pool == NULL) {
    cu_mem_pool_props props;
    memset(&props, 0, sizeof props);
    props.alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location_type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location_id = ordinal;
    uint64_t keep_all = UINT64_MAX;
    int rc = cu.MemPoolCreate(&pool, &props);
    if (rc == CUDA_SUCCESS) {
      rc = cu.MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all);
      /* not kept: an empty pool, never used; the error worth reporting is the attribute's, not the destroy's */
      if (rc != CUDA_SUCCESS) (void)cu.MemPoolDestroy(pool);
    }
    if (rc != CUDA_SUCCESS) {
      char what[192];
      snprintf(what, sizeof what, "creating a scratch memory pool on device %d (%s)", ordinal, d->name);
      cu_fail(err, rc, what);
      pool = NULL;
    } else {
      atomic_store_explicit(&d->scratch_pool, pool, memory_order_release);
    }
  }
  pthread_mutex_unlock(&load_lock);
  return pool;
}

/* Encode a tensor descriptor over the whole tensor (of the descriptor's rank, last dimension
 * contiguous: push_descriptor checked), with the box, swizzle and element type the compiler chose.
 * Checks what else TMA requires first, naming the argument. */
static int encode_tma(const aot_variant *var, const aot_tma *m, const aot_param *prm, const aot_tensor *t,
                      cu_tensor_map *map, aot_error *err) {
  if (cu.TensorMapEncodeTiled == NULL) return missing_entry(err, "cuTensorMapEncodeTiled", var);
  int rank = m->rank;
  uint64_t dims[5], strides[5];
  uint32_t box[5], element_strides[5] = {1, 1, 1, 1, 1};
  int64_t last_byte = 0; /* the offset of the last element's first byte */
  if (t->ptr % 16 != 0)
    return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs a 16-byte aligned address, got 0x%" PRIx64,
                    prm->name, t->ptr);
  for (int d = 0; d < rank; d++) {
    int64_t size = t->shape[d], stride = t->strides[d], stride_bytes, reach;
    if (size < 1)
      return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs sizes from 1 to 2^31-1, got %" PRId64
                      " in dimension %d", prm->name, size, d);
    if (__builtin_mul_overflow(stride, (int64_t)m->elem_size, &stride_bytes) ||
        __builtin_mul_overflow(size - 1, stride_bytes, &reach) || __builtin_add_overflow(last_byte, reach, &last_byte))
      return aot_fail(err, AOT_E_VALUE, "argument %s: its shape and strides span more than 64-bit sizes in bytes "
                      "(stride %" PRId64 " of dimension %d, %d-byte elements)", prm->name, stride, d, m->elem_size);
    if (d < rank - 1 && stride_bytes % 16 != 0)
      return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs strides of a multiple of 16 bytes; "
                      "stride %" PRId64 " of dimension %d is %" PRId64 " bytes", prm->name, stride, d, stride_bytes);
    dims[rank - 1 - d] = (uint64_t)size;
    if (d < rank - 1) strides[rank - 2 - d] = (uint64_t)stride_bytes;
    box[rank - 1 - d] = m->box[d];
  }
  int rc = cu.TensorMapEncodeTiled(map, m->elem_type, (unsigned)rank, (void *)(uintptr_t)t->ptr, dims, strides, box,
                                   element_strides, 0, m->swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0);
  if (rc != CUDA_SUCCESS) {
    char what[128];
    snprintf(what, sizeof what, "encoding the tensor descriptor of argument %s (cuTensorMapEncodeTiled)", prm->name);
    return cu_fail(err, rc, what);
  }
  /* Drivers up to CUDA 13.1 set a flag in descriptors of tensors smaller than 128 KiB that makes
   * loads go wrong; CUTLASS and Triton clear it (bit 21 of the second word) the same way. */
  if (driver_version <= 13010 && last_byte <= 128 * 1024 - m->elem_size) {
    uint64_t word;
    memcpy(&word, map->bytes + 8, sizeof word);
    word &= ~(UINT64_C(1) << 21);
    memcpy(map->bytes + 8, &word, sizeof word);
  }
  return 0;
}

/* x rounded up to a multiple of align (0 or 1: x itself) into *out; nonzero when that passes size_t. */
static int round_up(size_t x, size_t align, size_t *out) {
  if (align <= 1) return *out = x, 0;
  if (__builtin_add_overflow(x, align - 1, out)) return 1;
  *out = *out / align * align;
  return 0;
}

/* The kernel's parameter values, copied into one aligned buffer, and the driver's pointer list. */
enum { MAX_PARAMS = 4 * AOT_MAX_ARGS + 3 };
typedef struct {
  _Alignas(64) unsigned char bytes[8192];
  size_t used;
  void *params[MAX_PARAMS];
  int n;
} param_pack;

static int push(param_pack *p, const void *value, size_t size, size_t align, aot_error *err) {
  size_t at;
  if (round_up(p->used, align, &at) || at + size > sizeof p->bytes || p->n + 1 >= MAX_PARAMS) /* at, size < 9 KB */
    return aot_fail(err, AOT_E_VALUE, "the kernel's parameters exceed what aotpack can pass (%d values, %zu bytes)",
                    MAX_PARAMS, sizeof p->bytes);
  memset(p->bytes + p->used, 0, at - p->used); /* no stray bytes in padding */
  memcpy(p->bytes + at, value, size);
  p->params[p->n++] = p->bytes + at;
  p->used = at + size;
  return 0;
}

static int push_dims(param_pack *p, const aot_tensor *t, int rank, int shape_i32, aot_error *err) {
  int rc = 0;
  for (int d = 0; d < rank && rc == 0; d++) {
    int32_t small = (int32_t)t->shape[d];
    rc = shape_i32 ? push(p, &small, 4, 4, err) : push(p, &t->shape[d], 8, 8, err);
  }
  for (int d = 0; d < rank && rc == 0; d++) rc = push(p, &t->strides[d], 8, 8, err);
  return rc;
}

/* A descriptor argument: with TMA, the encoded map, then the shape (i32) and strides (i64); without,
 * as Triton decomposes it: the pointer, shape and strides (i64), two flags (no NaN padding, no tf32
 * rounding), then the shape (i32) and strides again. */
static int push_descriptor(param_pack *p, const aot_variant *var, const aot_tma *m, const aot_param *prm,
                           const aot_tensor *t, aot_error *err) {
  static const uint8_t no = 0;
  int rank = prm->desc_rank;
  if (t->ndim != rank)
    return aot_fail(err, AOT_E_VALUE,
                    t->ndim < 0 ? "argument %s: a tensor descriptor is built from the tensor's shape and strides; "
                                  "pass a tensor of %d dimensions, not a raw pointer"
                                : "argument %s: expected a tensor of %d dimensions, got %d",
                    prm->name, rank, t->ndim);
  if (t->strides[rank - 1] != 1)
    return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs its last dimension contiguous "
                    "(stride 1), got stride %" PRId64 "; call .contiguous() on it", prm->name, t->strides[rank - 1]);
  for (int d = 0; d < rank; d++) /* the kernel reads the sizes as i32 */
    if (t->shape[d] > INT32_MAX)
      return aot_fail(err, AOT_E_VALUE, "argument %s: a tensor descriptor needs sizes up to 2^31-1, got %" PRId64
                      " in dimension %d", prm->name, t->shape[d], d);
  if (m != NULL) {
    cu_tensor_map map;
    if (encode_tma(var, m, prm, t, &map, err) != 0 || push(p, &map, sizeof map, 64, err) != 0) return -1;
    return push_dims(p, t, rank, 1, err);
  }
  if (push(p, &t->ptr, 8, 8, err) != 0 || push_dims(p, t, rank, 0, err) != 0 || push(p, &no, 1, 1, err) != 0 ||
      push(p, &no, 1, 1, err) != 0)
    return -1;
  return push_dims(p, t, rank, 1, err);
}

/* The call's arguments (Triton's trailing scratch pointers are pushed once allocated). */
static int pack_args(const aot_kernel *k, const aot_call *call, const aot_variant *var, param_pack *p,
                     aot_error *err) {
  p->used = 0, p->n = 0;
  int desc = 0, rc = 0;
  for (int i = 0; i < k->nparams && rc == 0; i++) {
    const aot_param *prm = &k->params[i];
    if (prm->launch_only || (var->folded >> i & 1)) continue; /* not a parameter of this code */
    if (prm->desc_rank) {
      rc = push_descriptor(p, var, var->tma ? &var->tma[desc++] : NULL, prm, &call->t[i], err);
      continue;
    }
    float f32 = (float)call->f[i];
    uint32_t f32_bits;
    memcpy(&f32_bits, &f32, sizeof f32_bits);
    int32_t i32 = (int32_t)call->i[i];
    /* as Triton's launcher packs them: fp16 rounded to nearest even, bf16 the float truncated, booleans
     * in 32 bits */
    uint16_t half = (uint16_t)(prm->kind == AOT_ARG_F16 ? aot_f16_bits(call->f[i]) : (int32_t)(f32_bits >> 16));
    switch (prm->kind) {
    case AOT_ARG_PTR: rc = push(p, &call->t[i].ptr, 8, 8, err); break;
    case AOT_ARG_F16: case AOT_ARG_BF16: rc = push(p, &half, 2, 2, err); break;
    case AOT_ARG_F32: rc = push(p, &f32, 4, 4, err); break;
    case AOT_ARG_F64: rc = push(p, &call->f[i], 8, 8, err); break;
    case AOT_ARG_I32: case AOT_ARG_U32: case AOT_ARG_BOOL: rc = push(p, &i32, 4, 4, err); break;
    default: rc = push(p, &call->i[i], 8, 8, err); break;
    }
  }
  return rc;
}

/* Launch on `blocks` (a cluster of num_ctas blocks along x counts num_ctas there). */
static int launch_ex(const aot_variant *var, CUfunction fn, const int64_t blocks[3], const int64_t block[3],
                     int64_t shared, aot_stream stream, void **params, aot_error *err) {
  if (var->num_ctas == 1 && !var->cooperative && !var->pdl)
    return cu.LaunchKernel(fn, (unsigned)blocks[0], (unsigned)blocks[1], (unsigned)blocks[2], (unsigned)block[0],
                           (unsigned)block[1], (unsigned)block[2], (unsigned)shared, stream, params, NULL);
  if (cu.LaunchKernelEx == NULL) return missing_entry(err, "cuLaunchKernelEx", var);
  cu_launch_attribute attrs[4];
  memset(attrs, 0, sizeof attrs);
  unsigned n = 0;
  if (var->num_ctas > 1) { /* a cluster of num_ctas blocks along x */
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.cluster.x = var->num_ctas, attrs[n].value.cluster.y = 1, attrs[n++].value.cluster.z = 1;
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    attrs[n++].value.flag = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  }
  if (var->cooperative) attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, attrs[n++].value.flag = 1;
  if (var->pdl) attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, attrs[n++].value.flag = 1;
  cu_launch_config config = {
      {(unsigned)blocks[0], (unsigned)blocks[1], (unsigned)blocks[2]},
      {(unsigned)block[0], (unsigned)block[1], (unsigned)block[2]},
      (unsigned)shared, stream, attrs, n};
  return cu.LaunchKernelEx(&config, fn, params, NULL);
}

/* A launch's global scratch, global then the profiler's: bytes per program times programs (each block of
 * a cluster is one), each part at its alignment, plus room to align the base. Nonzero when a size passes
 * size_t (a grid no memory could serve). */
typedef struct {
  size_t profile_at, bytes, align, alloc;
} scratch_plan;

static int plan_scratch(const aot_variant *var, const int64_t blocks[3], scratch_plan *s) {
  size_t programs, global, profile;
  s->align = var->scratch[1] > var->profile_scratch[1] ? var->scratch[1] : var->profile_scratch[1];
  return __builtin_mul_overflow((size_t)blocks[0], (size_t)blocks[1], &programs) ||
         __builtin_mul_overflow(programs, (size_t)blocks[2], &programs) ||
         __builtin_mul_overflow(programs, (size_t)var->scratch[0], &global) ||
         round_up(global, var->profile_scratch[1], &s->profile_at) ||
         __builtin_mul_overflow(programs, (size_t)var->profile_scratch[0], &profile) ||
         __builtin_add_overflow(s->profile_at, profile, &s->bytes) ||
         __builtin_add_overflow(s->bytes, s->align, &s->alloc);
}

/* Check a launch's sizes against CUDA's limits: the grid (blocks, counting each block of a cluster, into
 * `blocks`), the block's threads and the dynamic shared memory. 1: Triton's syntax with an empty grid
 * (nothing to launch), 0, or -1 and err. Every product is checked: one past int64 is past a limit. */
static int check_launch(const aot_kernel *k, aot_call *call, const aot_variant *var, const device_state *d,
                        const int64_t grid[3], const int64_t block[3], int64_t shared, int64_t blocks[3]) {
  static const int64_t limit[3] = {INT32_MAX, 65535, 65535};
  const char *syntax = call->launch_config > 0 ? "[grid](...)" : "()";
  for (int i = 0; i < 3; i++) {
    if (grid[i] == 0 && call->launch_config > 0) return 1;
    if (grid[i] <= 0 && call->launch_config > 0)
      return aot_fail(call->err, AOT_E_VALUE, "%s[grid](...): grid dimension %d is %" PRId64, k->name, i, grid[i]);
    if (grid[i] <= 0)
      return aot_fail(call->err, AOT_E_VALUE, "%s(): grid dimension %d, %s, is %" PRId64 " for this call: nothing "
                      "would run; check the arguments (an empty input?)", k->name, i, k->grid_exprs[i], grid[i]);
    int cluster = i == 0 ? var->num_ctas : 1;
    if (__builtin_mul_overflow(grid[i], (int64_t)cluster, &blocks[i]) || blocks[i] > limit[i]) {
      char clusters[48] = "";
      if (cluster > 1) snprintf(clusters, sizeof clusters, " clusters of %d blocks", cluster);
      return aot_fail(call->err, AOT_E_VALUE, "%s%s: grid dimension %d is %" PRId64 "%s, above the CUDA limit of %"
                      PRId64 " blocks; check the arguments", k->name, syntax, i, grid[i], clusters, limit[i]);
    }
  }
  int64_t threads;
  if (block[0] < 1 || block[1] < 1 || block[2] < 1 || __builtin_mul_overflow(block[0], block[1], &threads) ||
      __builtin_mul_overflow(threads, block[2], &threads) || threads > 1024)
    return aot_fail(call->err, AOT_E_VALUE, "%s(): block %" PRId64 "x%" PRId64 "x%" PRId64 " is not 1 to 1024 "
                    "threads; check the arguments", k->name, block[0], block[1], block[2]);
  if (shared < 0 || shared > (int64_t)d->max_shared_optin - var->static_shared) /* small: no overflow */
    return aot_fail(call->err, AOT_E_VALUE, "%s(): %" PRId64 " bytes of dynamic shared memory (beside %u static) is "
                    "over the %d bytes %s allows per block", k->name, shared, var->static_shared, d->max_shared_optin,
                    d->name);
  return 0;
}

static int launch_variant(const aot_kernel *k, aot_call *call, int v, int ordinal, device_state *d, aot_stream stream) {
  aot_error *err = call->err;
  const aot_variant *var = &k->variants[v];
  const int64_t *consts = config_consts(k, var->config);
  int64_t grid[3], blocks[3], block[3] = {32 * (int64_t)var->num_warps, 1, 1}, shared = var->shared;
  if (call->launch_config > 0) memcpy(grid, call->grid, sizeof grid); /* Triton's launch syntax: the caller's */
  else k->grid(call, consts, grid);
  if (k->block != NULL) k->block(call, consts, block);
  if (k->shared != NULL) k->shared(call, consts, &shared);
  if (err->status != AOT_OK) return -1;
  int checked = check_launch(k, call, var, d, grid, block, shared, blocks);
  if (checked != 0) return checked > 0 ? 0 : -1; /* Triton's syntax: an empty grid launches nothing */
  scratch_plan scratch_at = {0, 0, 0, 0};
  if ((var->scratch[0] || var->profile_scratch[0]) && plan_scratch(var, blocks, &scratch_at) != 0)
    return aot_fail(err, AOT_E_VALUE, "%s(): %s needs %u + %u bytes of scratch memory per block, for %" PRId64 "x%"
                    PRId64 "x%" PRId64 " blocks: more than 64-bit sizes hold; check the arguments (the grid)", k->name,
                    var->id, var->scratch[0], var->profile_scratch[0], blocks[0], blocks[1], blocks[2]);
  CUfunction fn = function(k, v, ordinal, d, err);
  param_pack pack;
  if (fn == NULL || pack_args(k, call, var, &pack, err) != 0) return -1;

  CUcontext current = NULL, popped;
  int rc = cu.CtxGetCurrent(&current);
  if (rc != CUDA_SUCCESS) return cu_fail(err, rc, "reading the calling thread's context (cuCtxGetCurrent)");
  int pushed = current != d->context;
  if (pushed && (rc = cu.CtxPushCurrent(d->context)) != CUDA_SUCCESS)
    return cu_fail(err, rc, "making the device's context current");
  CUdeviceptr base = 0, scratch = 0, profile = 0;
  int status = 0;
  if (scratch_at.bytes > 0) {
    void *pool = scratch_pool(d, ordinal, var, err);
    if (pool == NULL) {
      status = -1;
    } else if ((rc = cu.MemAllocFromPoolAsync(&base, scratch_at.alloc, pool, stream)) != CUDA_SUCCESS) {
      char what[128];
      snprintf(what, sizeof what, "allocating %zu bytes of scratch memory for %s", scratch_at.alloc, var->id);
      status = cu_fail(err, rc, what);
    } else {
      size_t aligned;
      (void)round_up(base, scratch_at.align, &aligned); /* inside the allocation (align bytes past base): no wrap */
      scratch = var->scratch[0] ? aligned : 0;
      profile = var->profile_scratch[0] ? aligned + scratch_at.profile_at : 0;
    }
  }
  /* Triton's trailing scratch pointers: global, then profile (null when the variant needs none) */
  CUdeviceptr extra[2] = {scratch, profile};
  for (int e = 0; e < var->extra_ptrs && status == 0; e++) status = push(&pack, &extra[e], 8, 8, err);
  pack.params[pack.n] = NULL; /* the driver reads the kernel's count; tools that walk the list need the end */
  if (status == 0 && (rc = launch_ex(var, fn, blocks, block, shared, stream, pack.params, err)) != CUDA_SUCCESS) {
    char what[512];
    snprintf(what, sizeof what, "launching %s on device %d", var->id, ordinal);
    status = err->status != AOT_OK ? -1 : cu_fail(err, rc, what);
  }
  /* freed after the kernel, in stream order; a failure after a launch (a fault of the kernel, typically) is
   * reported, as is one restoring the caller's context, unless an earlier error is */
  if (base != 0 && (rc = cu.MemFreeAsync(base, stream)) != CUDA_SUCCESS && status == 0)
    status = cu_fail(err, rc, "freeing scratch memory after the launch (cuMemFreeAsync)");
  if (pushed && (rc = cu.CtxPopCurrent(&popped)) != CUDA_SUCCESS && status == 0)
    status = cu_fail(err, rc, "restoring the caller's context (cuCtxPopCurrent)");
  return status;
}
