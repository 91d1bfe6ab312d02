/* The NVIDIA driver, loaded once (dlopen'ed: no CUDA library at build time), and the devices, opened lazily;
 * the runtime's errors. See aot_runtime.h. */
#include "aot_internal.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>

/* ---------------------------------------------------------------- the driver, loaded once */

struct rt_driver rt_cu;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static aot_error driver_error; /* written once under driver_once, read-only after */
int rt_driver_version;         /* these two likewise */
static int device_count;

int aot_fail(aot_error *err, aot_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  err->status = status;
  return -1;
}

const char *rt_cu_name(int rc) {
  const char *name = NULL;
  if (rt_cu.GetErrorName == NULL || rt_cu.GetErrorName(rc, &name) != CUDA_SUCCESS || name == NULL) return "unknown";
  return name;
}

int rt_cu_fail(aot_error *err, int rc, const char *what) {
  const char *text = NULL;
  if (rt_cu.GetErrorString == NULL || rt_cu.GetErrorString(rc, &text) != CUDA_SUCCESS || text == NULL) text = "";
  return aot_fail(err, AOT_E_CUDA, "%s failed: %s (%d): %s", what, rt_cu_name(rc), rc, text);
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
    *(void **)&rt_cu.field = dlsym(lib, symbol);                                                             \
    if (rt_cu.field == NULL) {                                                                               \
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
  *(void **)&rt_cu.LaunchKernelEx = dlsym(lib, "cuLaunchKernelEx");
  *(void **)&rt_cu.TensorMapEncodeTiled = dlsym(lib, "cuTensorMapEncodeTiled");
  *(void **)&rt_cu.MemPoolCreate = dlsym(lib, "cuMemPoolCreate");
  *(void **)&rt_cu.MemPoolSetAttribute = dlsym(lib, "cuMemPoolSetAttribute");
  *(void **)&rt_cu.MemPoolDestroy = dlsym(lib, "cuMemPoolDestroy");
  *(void **)&rt_cu.MemAllocFromPoolAsync = dlsym(lib, "cuMemAllocFromPoolAsync");
  *(void **)&rt_cu.MemFreeAsync = dlsym(lib, "cuMemFreeAsync");
  int rc = rt_cu.Init(0);
  if (rc == CUDA_ERROR_NO_DEVICE) {
    aot_fail(&driver_error, AOT_E_CUDA, "no CUDA device: the NVIDIA driver is installed but sees no GPU "
                                        "(cuInit: CUDA_ERROR_NO_DEVICE); check CUDA_VISIBLE_DEVICES");
    return;
  }
  if (rc != CUDA_SUCCESS) {
    rt_cu_fail(&driver_error, rc, "initializing the NVIDIA driver (cuInit)");
    return;
  }
  if ((rc = rt_cu.DriverGetVersion(&rt_driver_version)) != CUDA_SUCCESS ||
      (rc = rt_cu.DeviceGetCount(&device_count)) != CUDA_SUCCESS) {
    rt_cu_fail(&driver_error, rc, "querying the NVIDIA driver");
    return;
  }
  driver_error.status = AOT_OK;
}

int rt_driver(aot_error *err) {
  pthread_once(&driver_once, load_driver);
  if (driver_error.status != AOT_OK) {
    *err = driver_error;
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------- devices, initialized lazily */

static device_state devices[AOT_MAX_DEVICES];
pthread_mutex_t rt_load_lock = PTHREAD_MUTEX_INITIALIZER;

device_state *rt_device(int ordinal, aot_error *err) {
  if (rt_driver(err) != 0) return NULL;
  if (ordinal < 0 || ordinal >= device_count || ordinal >= AOT_MAX_DEVICES) {
    aot_fail(err, AOT_E_VALUE, "CUDA device %d does not exist (this machine has %d)", ordinal, device_count);
    return NULL;
  }
  device_state *d = &devices[ordinal];
  if (atomic_load_explicit(&d->ready, memory_order_acquire)) return d;
  pthread_mutex_lock(&rt_load_lock);
  int rc = CUDA_SUCCESS, major = 0, minor = 0;
  CUdevice dev;
  if (!atomic_load_explicit(&d->ready, memory_order_relaxed)) {
    if ((rc = rt_cu.DeviceGet(&dev, ordinal)) == CUDA_SUCCESS &&
        (rc = rt_cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) == CUDA_SUCCESS &&
        (rc = rt_cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) == CUDA_SUCCESS &&
        (rc = rt_cu.DeviceGetAttribute(&d->max_shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                       dev)) == CUDA_SUCCESS &&
        (rc = rt_cu.DeviceGetAttribute(&d->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev)) == CUDA_SUCCESS &&
        (rc = rt_cu.DeviceGetAttribute(&d->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)) == CUDA_SUCCESS &&
        (rc = rt_cu.DeviceGetName(d->name, (int)sizeof d->name, dev)) == CUDA_SUCCESS &&
        (rc = rt_cu.DevicePrimaryCtxRetain(&d->context, dev)) == CUDA_SUCCESS) {
      d->capability = major * 10 + minor;
      atomic_store_explicit(&d->ready, 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&rt_load_lock);
  if (rc != CUDA_SUCCESS) {
    char what[64];
    snprintf(what, sizeof what, "opening CUDA device %d", ordinal);
    rt_cu_fail(err, rc, what);
    return NULL;
  }
  return d;
}
