/* The floor under a launch, for benchmarks/launch.py: the same cubin launched by a bare cuLaunchKernel
 * loop, and the demo package's C API call of the same kernel, timed as launch.py times Python calls
 * (median over rounds of back-to-back calls, synchronizing between rounds).
 *
 *   launch_floor CUBIN ENTRY THREADS GRID N  ->  prints "raw <us per call>" and "c_api <us per call>"
 *
 * Built by launch.py against the installed demo_kernels (its header and libdemo_kernels.so). The
 * driver is opened with dlopen, as the runtime does, so no CUDA toolkit is needed to build this. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "demo_kernels.h"

#define CALLS 400
#define ROUNDS 25

typedef int (*init_fn)(unsigned);
typedef int (*device_get_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*ctx_fn)(void *);
typedef int (*sync_fn)(void);
typedef int (*load_fn)(void **, const void *);
typedef int (*get_function_fn)(void **, void *, const char *);
typedef int (*alloc_fn)(uint64_t *, size_t);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                         void **, void **);

static sync_fn synchronize;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* median over ROUNDS of (time of CALLS calls) / CALLS, in microseconds; -1 when a call fails */
static double per_call(int (*call)(void *), void *arg) {
  for (int i = 0; i < 200; i++)
    if (call(arg) != 0) return -1;
  synchronize();
  double rounds[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now();
    for (int i = 0; i < CALLS; i++) call(arg);
    rounds[r] = (now() - t0) / CALLS * 1e6;
    synchronize();
  }
  qsort(rounds, ROUNDS, sizeof rounds[0], by_value);
  return rounds[ROUNDS / 2];
}

typedef struct {
  launch_fn launch;
  void *function;
  unsigned grid, threads;
  void **params;
  demo_kernels_tensor x, y, out;
} bench;

static int raw(void *arg) {
  bench *b = arg;
  return b->launch(b->function, b->grid, 1, 1, b->threads, 1, 1, 0, NULL, b->params, NULL);
}

static int c_api(void *arg) {
  bench *b = arg;
  char error[256];
  int rc = demo_kernels_add(NULL, 0, b->x, b->y, b->out, NULL, error, sizeof error);
  if (rc != 0) fprintf(stderr, "demo_kernels_add: %s\n", error);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s CUBIN ENTRY THREADS GRID N\n", argv[0]);
    return 2;
  }
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda == NULL) return fprintf(stderr, "no libcuda.so.1\n"), 1;
#define SYM(type, name) type name = (type)dlsym(cuda, #name)
  SYM(init_fn, cuInit);
  SYM(device_get_fn, cuDeviceGet);
  SYM(retain_fn, cuDevicePrimaryCtxRetain);
  SYM(ctx_fn, cuCtxSetCurrent);
  SYM(load_fn, cuModuleLoadData);
  SYM(get_function_fn, cuModuleGetFunction);
  SYM(alloc_fn, cuMemAlloc_v2);
  SYM(launch_fn, cuLaunchKernel);
  synchronize = (sync_fn)dlsym(cuda, "cuCtxSynchronize");
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) return fprintf(stderr, "cannot open %s\n", argv[1]), 1;
  static unsigned char image[1 << 24];
  size_t size = fread(image, 1, sizeof image - 1, f);
  fclose(f);
  image[size] = 0;
  int device = 0, n = atoi(argv[5]);
  void *context = NULL, *module = NULL;
  bench b = {.launch = cuLaunchKernel, .threads = (unsigned)atoi(argv[3]), .grid = (unsigned)atoi(argv[4])};
  uint64_t x = 0, y = 0, out = 0, null = 0;
  if (cuInit(0) || cuDeviceGet(&device, 0) || cuDevicePrimaryCtxRetain(&context, device) ||
      cuCtxSetCurrent(context) || cuModuleLoadData(&module, image) ||
      cuModuleGetFunction(&b.function, module, argv[2]) || cuMemAlloc_v2(&x, (size_t)n * 4) ||
      cuMemAlloc_v2(&y, (size_t)n * 4) || cuMemAlloc_v2(&out, (size_t)n * 4))
    return fprintf(stderr, "CUDA set-up failed\n"), 1;
  /* Triton's parameters: the three pointers, n, then its global and profile scratch pointers (null) */
  void *params[] = {&x, &y, &out, &n, &null, &null};
  b.params = params;
  int64_t shape[1] = {n};
  b.x = (demo_kernels_tensor){x, DEMO_KERNELS_FP32, 1, shape, NULL};
  b.y = (demo_kernels_tensor){y, DEMO_KERNELS_FP32, 1, shape, NULL};
  b.out = (demo_kernels_tensor){out, DEMO_KERNELS_FP32, 1, shape, NULL};
  printf("raw %.3f\n", per_call(raw, &b));
  printf("c_api %.3f\n", per_call(c_api, &b));
  return 0;
}
