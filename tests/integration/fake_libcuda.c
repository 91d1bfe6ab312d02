/* A stand-in for the NVIDIA driver (libcuda.so.1) so the generated runtime's dispatch, loading and
 * launch path can be tested on machines without a GPU. It records loads and launches in the file
 * named by $FAKE_CUDA_LOG. Settings: FAKE_CUDA_CC (compute capability, e.g. 90), FAKE_CUDA_DRIVER
 * (e.g. 13000), FAKE_CUDA_DEVICES (count), FAKE_CUDA_CAPTURING (streams report graph capture),
 * FAKE_CUDA_SMS (multiprocessors: one count, or a count per device, comma-separated, the last for the rest),
 * FAKE_CUDA_NO_FUNCTION (cuModuleGetFunction fails), FAKE_CUDA_POOL_ATTR_FAILS (cuMemPoolSetAttribute fails).
 * Device pointers are any address >= 0x10000. Events read a fake clock that each launch advances
 * by its block count plus 16 times its threads per block (so fewer, smaller blocks look faster). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const void *image;
  char entry[128];
} fake_function;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loads;

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v ? atoi(v) : fallback;
}

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void record(const char *fmt, ...) {
  const char *path = getenv("FAKE_CUDA_LOG");
  if (!path) return;
  pthread_mutex_lock(&lock);
  FILE *f = fopen(path, "a");
  if (f) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
  }
  pthread_mutex_unlock(&lock);
}

int cuGetErrorName(int rc, const char **s) { *s = rc == 1 ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_FAKE"; return 0; }
int cuGetErrorString(int rc, const char **s) { (void)rc; *s = "fake driver error"; return 0; }
int cuInit(unsigned flags) { (void)flags; return env_int("FAKE_CUDA_DEVICES", 1) > 0 ? 0 : 100; }
int cuDriverGetVersion(int *v) { *v = env_int("FAKE_CUDA_DRIVER", 13000); return 0; }
int cuDeviceGetCount(int *n) { *n = env_int("FAKE_CUDA_DEVICES", 1); return 0; }
int cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return 0; }
/* FAKE_CUDA_SMS: multiprocessors, one count for every device or a comma-separated count per device */
static int sms_of(int dev) {
  const char *v = getenv("FAKE_CUDA_SMS");
  if (!v) return 132;
  for (int i = 0; i < dev && strchr(v, ','); i++) v = strchr(v, ',') + 1; /* the last count serves the rest */
  return atoi(v);
}
int cuDeviceGetAttribute(int *v, int attr, int dev) {
  int cc = env_int("FAKE_CUDA_CC", 90);
  *v = attr == 75 ? cc / 10 : attr == 76 ? cc % 10 : attr == 97 ? 232448 : attr == 38 ? 50 << 20
      : attr == 16 ? sms_of(dev) : 0;
  return 0;
}
int cuDeviceGetName(char *name, int len, int dev) { snprintf(name, (size_t)len, "Fake GPU %d", dev); return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)(uintptr_t)(0x1000 + dev); return 0; }
static __thread void *current;
int cuCtxGetCurrent(void **ctx) { *ctx = current; return 0; }
int cuCtxPushCurrent_v2(void *ctx) { current = ctx; return 0; }
int cuCtxPopCurrent_v2(void **ctx) { *ctx = current; current = NULL; return 0; }
int cuModuleLoadData(void **module, const void *image) {
  pthread_mutex_lock(&lock);
  loads++;
  pthread_mutex_unlock(&lock);
  record("load %p ctx=%p", image, current);
  *module = (void *)image;
  return 0;
}
int cuModuleUnload(void *module) { record("unload %p", module); return 0; }
int cuModuleGetFunction(void **fn, void *module, const char *name) {
  if (env_int("FAKE_CUDA_NO_FUNCTION", 0)) return 500; /* CUDA_ERROR_NOT_FOUND */
  fake_function *f = calloc(1, sizeof *f);
  f->image = module;
  snprintf(f->entry, sizeof f->entry, "%s", name);
  *fn = f;
  return 0;
}
int cuFuncSetAttribute(void *fn, int attr, int value) { (void)fn; record("attr %d=%d", attr, value); return 0; }
static __thread double fake_clock;
int cuEventCreate(void **event, unsigned flags) { (void)flags; *event = calloc(1, sizeof(double)); return 0; }
int cuEventRecord(void *event, void *stream) { (void)stream; *(double *)event = fake_clock; return 0; }
int cuEventSynchronize(void *event) { (void)event; return 0; }
int cuEventElapsedTime(float *ms, void *start, void *stop) { *ms = (float)(*(double *)stop - *(double *)start); return 0; }
int cuEventDestroy_v2(void *event) { free(event); return 0; }
int cuStreamIsCapturing(void *stream, int *status) { (void)stream; *status = env_int("FAKE_CUDA_CAPTURING", 0); return 0; }

int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
  (void)extra;
  fake_function *f = fn;
  fake_clock += (double)gx * gy * gz + 16.0 * bx * by * bz;
  unsigned long long p[3] = {0, 0, 0};
  int p3 = 0;
  for (int i = 0; i < 3 && params[i]; i++) p[i] = *(unsigned long long *)params[i];
  if (params[0] && params[1] && params[2] && params[3]) p3 = *(int *)params[3];
  if (!getenv("FAKE_CUDA_LOG")) return 0; /* nothing to record: as cheap as a launch can be (profiling) */
  record("launch %s image=%p grid=%u,%u,%u block=%u,%u,%u shared=%u stream=%p p0=%llx p1=%llx p2=%llx p3=%d ctx=%p",
         f->entry, f->image, gx, gy, gz, bx, by, bz, shared, stream, p[0], p[1], p[2], p3, current);
  /* The runtime packs the values into one buffer in order, the last one a pointer (Triton's trailing
   * scratch pointers): dump that buffer as hex, with each value's offset. */
  int n = 0;
  while (params[n]) n++;
  char text[4096] = "params";
  size_t off = strlen(text);
  const unsigned char *base = params[0];
  for (int i = 0; n > 0 && i < n && off < sizeof text - 32; i++)
    off += (size_t)snprintf(text + off, sizeof text - off, " @%ld", (long)((const unsigned char *)params[i] - base));
  off += (size_t)snprintf(text + off, sizeof text - off, " bytes=");
  long total = n > 0 ? (long)((const unsigned char *)params[n - 1] - base) + 8 : 0;
  for (long i = 0; i < total && off < sizeof text - 3; i++) off += (size_t)snprintf(text + off, sizeof text - off, "%02x", base[i]);
  record("%s", text);
  return 0;
}
int cuPointerGetAttribute(void *out, int attr, unsigned long long ptr) {
  if (ptr < 0x10000) return 1;
  *(int *)out = attr == 2 ? 2 /* device memory */ : (int)(ptr >> 40); /* device ordinal in bits 40.. */
  return 0;
}

/* Newer entry points: TMA descriptors, cuLaunchKernelEx and stream-ordered scratch memory. */
int cuTensorMapEncodeTiled(void *map, int type, unsigned rank, void *addr, const unsigned long long *dims,
                           const unsigned long long *strides, const unsigned *box, const unsigned *elem_strides,
                           int interleave, int swizzle, int l2, int fill) {
  (void)elem_strides;
  char text[256];
  int n = snprintf(text, sizeof text, "tma type=%d rank=%u addr=%p swizzle=%d l2=%d fill=%d interleave=%d", type, rank,
                   addr, swizzle, l2, fill, interleave);
  for (unsigned d = 0; d < rank; d++)
    n += snprintf(text + n, sizeof text - (size_t)n, " dim%u=%llu/%llu/%u", d, dims[d], d + 1 < rank ? strides[d] : 0ULL,
                  box[d]);
  record("%s", text);
  memset(map, 0, 128);
  memcpy(map, &addr, sizeof addr);
  return 0;
}
typedef struct {
  int id;
  char pad[4];
  union {
    char pad[64];
    unsigned value[3]; /* a flag, or a cluster's x, y, z */
  } value;
} fake_attribute;
typedef struct {
  unsigned grid[3], block[3], shared;
  void *stream;
  fake_attribute *attrs;
  unsigned nattrs;
} fake_launch_config;
int cuLaunchKernelEx(const fake_launch_config *c, void *fn, void **params, void **extra) {
  (void)params, (void)extra;
  char text[256];
  int n = snprintf(text, sizeof text, "launchex %s grid=%u,%u,%u block=%u shared=%u stream=%p",
                   ((fake_function *)fn)->entry, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->shared, c->stream);
  for (unsigned i = 0; i < c->nattrs; i++)
    n += snprintf(text + n, sizeof text - (size_t)n, " attr%d=%u", c->attrs[i].id, c->attrs[i].value.value[0]);
  record("%s", text);
  return 0;
}
static unsigned long long next_alloc = 0x7000000000ULL;
static int pools;
int cuMemPoolCreate(void **pool, const int *props) {
  pthread_mutex_lock(&lock);
  *pool = (void *)(uintptr_t)(0x5000 + 16 * ++pools);
  pthread_mutex_unlock(&lock);
  record("pool %p type=%d location=%d,%d", *pool, props[0], props[2], props[3]);
  return 0;
}
int cuMemPoolSetAttribute(void *pool, int attr, void *value) {
  record("pool %p attr %d=%llx", pool, attr, *(unsigned long long *)value);
  return env_int("FAKE_CUDA_POOL_ATTR_FAILS", 0) ? 1 : 0; /* CUDA_ERROR_INVALID_VALUE */
}
int cuMemPoolDestroy(void *pool) { record("pool %p destroyed", pool); return 0; }
int cuMemAllocFromPoolAsync(unsigned long long *ptr, size_t size, void *pool, void *stream) {
  pthread_mutex_lock(&lock);
  *ptr = next_alloc;
  next_alloc += (size + 0xFFFF) & ~0xFFFFULL;
  pthread_mutex_unlock(&lock);
  record("alloc %zu pool=%p stream=%p -> %llx", size, pool, stream, *ptr);
  return 0;
}
int cuMemFreeAsync(unsigned long long ptr, void *stream) { record("free %llx stream=%p", ptr, stream); return 0; }
int cuMemAlloc_v2(unsigned long long *ptr, size_t size) { return cuMemAllocFromPoolAsync(ptr, size, NULL, NULL); }
int cuMemFree_v2(unsigned long long ptr) { return cuMemFreeAsync(ptr, NULL); }
int cuMemsetD8Async(unsigned long long ptr, unsigned char value, size_t size, void *stream) {
  record("memset %llx %u %zu stream=%p", ptr, value, size, stream);
  return 0;
}
