/* The floor under a launch, for benchmarks/launch.py: the same cubin launched by a bare cuLaunchKernel
 * loop, and the demo package's C API call of the same kernel. Built by launch.py as a shared library
 * against the installed demo_kernels (its header and libdemo_kernels.so) and loaded into the Python
 * process that times the Python calls, so that both are timed in one process, in interleaved rounds:
 *
 *   floor_setup(cubin, entry, threads, grid, n)  ->  0, or -1 (with a message on stderr)
 *   floor_calls(which, calls)                    ->  0 after `calls` launches (0: raw, 1: C API), or -1
 *
 * The driver is opened with dlopen, as the runtime does, so no CUDA toolkit is needed to build this. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "demo_kernels.h"

typedef int (*init_fn)(unsigned);
typedef int (*device_get_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*ctx_fn)(void *);
typedef int (*load_fn)(void **, const void *);
typedef int (*get_function_fn)(void **, void *, const char *);
typedef int (*alloc_fn)(uint64_t *, size_t);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                         void **, void **);

static struct {
  launch_fn launch;
  void *function;
  unsigned grid, threads;
  uint64_t x, y, out, null;
  int n;
  void *params[6];
  int64_t shape[1];
  demo_kernels_tensor tx, ty, tout;
} b;

int floor_setup(const char *cubin, const char *entry, int threads, int grid, int n) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda == NULL) return fprintf(stderr, "no libcuda.so.1\n"), -1;
#define SYM(type, name) type name = (type)dlsym(cuda, #name)
  SYM(init_fn, cuInit);
  SYM(device_get_fn, cuDeviceGet);
  SYM(retain_fn, cuDevicePrimaryCtxRetain);
  SYM(ctx_fn, cuCtxSetCurrent);
  SYM(load_fn, cuModuleLoadData);
  SYM(get_function_fn, cuModuleGetFunction);
  SYM(alloc_fn, cuMemAlloc_v2);
#undef SYM
  b.launch = (launch_fn)dlsym(cuda, "cuLaunchKernel");
  FILE *f = fopen(cubin, "rb");
  if (f == NULL) return fprintf(stderr, "cannot open %s\n", cubin), -1;
  static unsigned char image[1 << 24];
  size_t size = fread(image, 1, sizeof image - 1, f);
  fclose(f);
  image[size] = 0;
  int device = 0;
  void *context = NULL, *module = NULL;
  b.threads = (unsigned)threads, b.grid = (unsigned)grid, b.n = n;
  if (cuInit(0) || cuDeviceGet(&device, 0) || cuDevicePrimaryCtxRetain(&context, device) ||
      cuCtxSetCurrent(context) || cuModuleLoadData(&module, image) || cuModuleGetFunction(&b.function, module, entry) ||
      cuMemAlloc_v2(&b.x, (size_t)n * 4) || cuMemAlloc_v2(&b.y, (size_t)n * 4) || cuMemAlloc_v2(&b.out, (size_t)n * 4))
    return fprintf(stderr, "CUDA set-up failed\n"), -1;
  /* Triton's parameters: the three pointers, n, then its global and profile scratch pointers (null) */
  void *params[] = {&b.x, &b.y, &b.out, &b.n, &b.null, &b.null};
  for (int i = 0; i < 6; i++) b.params[i] = params[i];
  b.shape[0] = n;
  b.tx = (demo_kernels_tensor){b.x, DEMO_KERNELS_FP32, 1, b.shape, NULL};
  b.ty = (demo_kernels_tensor){b.y, DEMO_KERNELS_FP32, 1, b.shape, NULL};
  b.tout = (demo_kernels_tensor){b.out, DEMO_KERNELS_FP32, 1, b.shape, NULL};
  return 0;
}

int floor_calls(int which, int calls) {
  char error[256];
  for (int i = 0; i < calls; i++) {
    int rc = which == 0 ? b.launch(b.function, b.grid, 1, 1, b.threads, 1, 1, 0, NULL, b.params, NULL)
                        : demo_kernels_add(NULL, 0, b.tx, b.ty, b.tout, NULL, error, sizeof error);
    if (rc != 0 && which == 0) return fprintf(stderr, "cuLaunchKernel: CUDA error %d\n", rc), -1;
    if (rc != 0) return fprintf(stderr, "demo_kernels_add: %s\n", error), -1;
  }
  return 0;
}
