/* The runtime's private header: what its files share (the driver's table and types, a device's state,
 * the dispatcher's choice) and the functions one file gives another, prefixed rt_. Never installed and
 * never included by generated code, which sees aot_runtime.h only; nothing here is exported (the
 * library is compiled with hidden visibility, and only aot_runtime.h marks its declarations default). */
#ifndef AOT_INTERNAL_H
#define AOT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "aot_runtime.h"

/* ---------------------------------------------------------------- the driver (aot_driver.c) */

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
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
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

/* The driver's entry points, looked up once by rt_driver(). */
struct rt_driver {
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
};
extern struct rt_driver rt_cu;
extern int rt_driver_version; /* CUDA driver version, 1000*major + 10*minor */
extern pthread_mutex_t rt_load_lock; /* devices, loaded functions and scratch pools are made under it */

/* A device, opened on first use. */
typedef struct {
  atomic_int ready; /* 0: not yet, 1: ready */
  CUcontext context;
  int capability;
  int max_shared_optin;
  int l2_bytes;
  int sms; /* multiprocessors */
  uint8_t planned; /* select(target=...): a GPU that need not be here (no context; its picks are not kept) */
  char name[128];
  void *_Atomic scratch_pool; /* CUmemoryPool for kernel scratch, created on first need */
} device_state;

int rt_driver(aot_error *err); /* 0 once the driver is loaded, or -1 and err */
device_state *rt_device(int ordinal, aot_error *err); /* the device opened, or NULL and err */
const char *rt_cu_name(int rc);
int rt_cu_fail(aot_error *err, int rc, const char *what); /* a driver error as err; returns -1 */

/* ---------------------------------------------------------------- choosing a variant (aot_dispatch.c) */

/* What the dispatcher tells aot_launch beside the variant: whether to time the configs, and the class miss. */
typedef struct {
  aot_tuned point; /* the call's target, binding, specialization and bucketed key */
  int untuned;     /* the key is past the table, and autotuning may time it */
  int miss;        /* the pick's class miss (rt_class_miss: index + 1, 0, or -1), or -2: not known yet */
} choice;

/* The variant for a call on device d (`forced` when >= 0, after checking it can run the call); -1 and err. */
int rt_choose(const aot_kernel *k, aot_call *call, const device_state *d, int forced, choice *c);
int rt_choose_target(const aot_kernel *k, const device_state *d, aot_error *err);
int rt_variant_for(const aot_kernel *k, const int64_t *key, int target, int binding, const device_state *d,
                   aot_error *err);
int rt_variant_in_config(const aot_kernel *k, aot_call *call, int config, int target, int binding, int first_spec);
int rt_config_fits(const aot_kernel *k, aot_call *call, int config);
const int64_t *rt_config_consts(const aot_kernel *k, int config);
int rt_class_miss(const aot_kernel *k, const aot_call *call, int v);
void rt_count_miss(const aot_kernel *k, aot_call *call, int miss);

/* ---------------------------------------------------------------- the rule between measured keys (aot_measured.c) */

/* The k rows with times nearest the key (log space of the exact key), nearest first; ties keep table order. */
typedef struct {
  int n, score, row[AOT_MAX_NEIGHBOURS];
  double dist[AOT_MAX_NEIGHBOURS], key_log2[AOT_MAX_KEY];
} nearest_rows;
void rt_nearest_add(const aot_kernel *k, nearest_rows *near, int r, int score); /* row r serves with score */
/* The config predicted fastest from the nearest rows (sms: the device's multiprocessors; target, binding, spec: the
 * call's, for the blocks per multiprocessor of the variant each config runs), or -1. */
int rt_predicted_config(const aot_kernel *k, aot_call *call, const int64_t *key, const nearest_rows *near, int sms,
                        int target, int binding, int spec);

/* ---------------------------------------------------------------- the tuned-choice memo (aot_memo.c) */

extern atomic_int rt_autotune_mode;   /* aot_tune_mode */
extern pthread_mutex_t rt_memo_lock; /* a kernel's memo: tuned keys and class misses */
int rt_memo_find(const aot_kernel *k, const aot_tuned *want);

/* A call's point: what decides its pick where nothing else does (aot_dispatch.c), and the set it is kept in. */
typedef struct {
  int32_t target, binding, sms;
  uint64_t states[2];
  int64_t key[AOT_MAX_KEY];
  aot_pick *set; /* its AOT_PICK_WAYS slots */
} pick_point;
void rt_pick_keep(const aot_kernel *k, const pick_point *pt, int v, int miss); /* aot_memo.c */

/* The variant kept for the point in slot s, or -1: a slot being written, or another point's. A sequence lock's read:
 * an even seq that reads the same before and after the copy. On every call: inline, and a slot of another key
 * leaves at its first differing field. */
static inline int rt_pick_read(const aot_kernel *k, const pick_point *pt, aot_pick *s, int *miss) {
  uint32_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
  if (seq == 0 || seq & 1) return -1; /* never written, or being written */
  for (int d = 0; d < k->nkey; d++)
    if (atomic_load_explicit(&s->key[d], memory_order_relaxed) != pt->key[d]) return -1;
  if (atomic_load_explicit(&s->target, memory_order_relaxed) != pt->target ||
      atomic_load_explicit(&s->binding, memory_order_relaxed) != pt->binding ||
      atomic_load_explicit(&s->sms, memory_order_relaxed) != pt->sms ||
      atomic_load_explicit(&s->states[0], memory_order_relaxed) != pt->states[0] ||
      atomic_load_explicit(&s->states[1], memory_order_relaxed) != pt->states[1])
    return -1;
  int v = atomic_load_explicit(&s->variant, memory_order_relaxed);
  int m = atomic_load_explicit(&s->miss, memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  if (atomic_load_explicit(&s->seq, memory_order_relaxed) != seq) return -1;
  *miss = m;
  return v;
}

/* The variant kept for the point in its set, or -1. */
static inline int rt_pick_find(const aot_kernel *k, const pick_point *pt, int *miss) {
  int v = -1;
  for (int way = 0; way < AOT_PICK_WAYS && v < 0; way++) v = rt_pick_read(k, pt, &pt->set[way], miss);
  return v;
}

/* ---------------------------------------------------------------- runtime autotuning (aot_tune.c) */

int rt_autotune(const aot_kernel *k, aot_call *call, int ordinal, device_state *d, aot_stream stream, choice *c);

/* ---------------------------------------------------------------- images and launches */

/* Variant v's function on a device, its image loaded on first use (aot_images.c); NULL and err. */
CUfunction rt_function(const aot_kernel *k, int v, int ordinal, const device_state *d, aot_error *err);
/* Launch variant v for the call (aot_launch.c); 0, or -1 and err. */
int rt_launch_variant(const aot_kernel *k, aot_call *call, int v, int ordinal, device_state *d, aot_stream stream);

#endif
