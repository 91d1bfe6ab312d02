/* Drives the shipped runtime and the generated C of the tests' small recipe through the package's C
 * API, built under AddressSanitizer and UndefinedBehaviorSanitizer (test_sanitize.py): good calls,
 * every kind of bad call, launches whose sizes pass 64 bits, a scratch pool the driver refuses to set up, and
 * eight threads launching at once, on the fake driver. One line per call. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot_runtime.h"
#include "small_kernels.h"

#define A 0x100000000ULL

static void call(const char *what, small_kernels_tensor x, small_kernels_tensor y, small_kernels_tensor out,
                 const int32_t *n) {
  char error[512] = "", variant[256] = "";
  int rc = small_kernels_add_select(NULL, 0, x, y, out, n, variant, sizeof variant, error, sizeof error);
  if (rc == 0) rc = small_kernels_add(NULL, 0, x, y, out, n, error, sizeof error);
  printf("%s: %s\n", what, rc == 0 ? variant : error);
}

/* A launch of the add kernel with what its variants lack (clusters, static shared memory, scratch, x_ptr as a
 * tensor descriptor) and a grid, block and dynamic shared memory of the test's choosing (through the kernel's
 * launch functions): sizes whose products or sums pass 64 bits must be refused as bad values. */
typedef struct {
  int64_t grid[3], block[3], shared;
  uint8_t num_ctas;
  uint32_t scratch[2], profile_scratch[2];
  int desc;                      /* 0: x_ptr is a plain pointer; 1: a 2-D descriptor (TMA); 2: decomposed */
  int64_t shape[2], strides[2]; /* x_ptr's, as a descriptor */
} sizes;

static sizes now;
static void now_grid(aot_call *x, const int64_t *c, int64_t grid[3]) {
  (void)x, (void)c, memcpy(grid, now.grid, sizeof now.grid);
}
static void now_block(aot_call *x, const int64_t *c, int64_t block[3]) {
  (void)x, (void)c, memcpy(block, now.block, sizeof now.block);
}
static void now_shared(aot_call *x, const int64_t *c, int64_t *bytes) { (void)x, (void)c, *bytes = now.shared; }
extern const aot_kernel aot_kernel_add;
static void *_Atomic now_functions[4096 * AOT_MAX_DEVICES]; /* static: the loaded functions stay reachable */

static void launch_sized(const char *what, sizes want) {
  static const aot_tma tma = {.box = {64, 64}, .rank = 2, .swizzle = 0, .elem_type = 7, .elem_size = 4};
  const aot_kernel *add = &aot_kernel_add;
  aot_kernel k = *add;
  aot_param *params = malloc((size_t)k.nparams * sizeof *params);
  aot_variant *variants = malloc((size_t)k.nvariants * sizeof *variants);
  memcpy(params, add->params, (size_t)k.nparams * sizeof *params);
  memcpy(variants, add->variants, (size_t)k.nvariants * sizeof *variants);
  params[0].desc_rank = want.desc ? 2 : 0;
  for (int v = 0; v < k.nvariants; v++) {
    variants[v].num_ctas = want.num_ctas, variants[v].static_shared = 1024;
    variants[v].tma = want.desc == 1 ? &tma : NULL;
    memcpy(variants[v].scratch, want.scratch, sizeof want.scratch);
    memcpy(variants[v].profile_scratch, want.profile_scratch, sizeof want.profile_scratch);
  }
  now = want;
  k.params = params, k.variants = variants, k.functions = now_functions;
  k.grid = now_grid, k.block = now_block, k.shared = now_shared;
  aot_error err = {AOT_OK, ""};
  aot_call c;
  int64_t n4096[1] = {4096};
  aot_call_start(&c, &k, &err);
  if (k.nvariants > 4096) aot_fail(&err, AOT_E_CUDA, "the test keeps function slots for 4096 variants");
  aot_set_tensor(&c, 0, A, SMALL_KERNELS_FP32, want.desc ? 2 : 1, want.desc ? want.shape : n4096,
                 want.desc ? want.strides : NULL);
  aot_set_tensor(&c, 1, A, SMALL_KERNELS_FP32, 1, n4096, NULL);
  aot_set_tensor(&c, 2, A, SMALL_KERNELS_FP32, 1, n4096, NULL);
  int rc = err.status == AOT_OK ? aot_launch(&k, &c, 0, NULL, -1) : -1;
  printf("%s: %s%s\n", what, rc == 0 ? "launched" : err.status == AOT_E_VALUE ? "bad value: " : "other error: ",
         rc == 0 ? "" : err.message);
  free(params);
  free(variants);
}

static void *launcher(void *arg) {
  int64_t shape[1];
  small_kernels_tensor t = {A, SMALL_KERNELS_FP32, 1, shape, NULL};
  char error[512];
  for (int i = 0; i < 200; i++) {
    shape[0] = 4096 + 16 * (i + (int)(intptr_t)arg);
    if (small_kernels_add(NULL, 0, t, t, t, NULL, error, sizeof error) != 0) {
      printf("thread: %s\n", error);
      return NULL;
    }
  }
  return NULL;
}

int main(void) {
  int64_t n4096[1] = {4096}, n100[1] = {100}, wide[2] = {INT64_C(1) << 62, 8}, wide_strides[2] = {8, 1};
  small_kernels_tensor x = {A, SMALL_KERNELS_FP32, 1, n4096, NULL};
  small_kernels_tensor h = {A, SMALL_KERNELS_FP16, 1, n4096, NULL};
  small_kernels_tensor small = {A, SMALL_KERNELS_FP32, 1, n100, NULL};
  small_kernels_tensor odd = {A + 4, SMALL_KERNELS_FP32, 1, n4096, NULL};
  small_kernels_tensor raw = {A, SMALL_KERNELS_FP32, -1, NULL, NULL};
  small_kernels_tensor huge = {A, SMALL_KERNELS_FP32, 2, wide, wide_strides};
  small_kernels_tensor nine = {A, SMALL_KERNELS_FP32, 9, n4096, NULL}; /* more dimensions than the runtime keeps */
  int32_t zero = 0, negative = -5, big = INT32_MAX;
  call("good", x, x, x, NULL);
  call("fp16 with fp32", x, h, x, NULL);
  call("too small", x, small, x, NULL);
  call("misaligned", odd, x, x, NULL);
  call("raw pointers", raw, raw, raw, &big);
  call("empty", x, x, x, &zero);
  call("negative", x, x, x, &negative);
  call("span past int64", huge, x, x, NULL);
  call("nine dimensions", nine, x, x, NULL);
  const sizes plain = {.grid = {16, 1, 1}, .block = {128, 1, 1}, .shared = 0, .num_ctas = 1, .scratch = {0, 1},
                       .profile_scratch = {0, 1}};
  sizes s = plain;
  s.num_ctas = 2;
  launch_sized("clusters", s);
  s.grid[0] = INT64_MAX / 2 + 1;
  launch_sized("clusters past int64", s);
  s = plain;
  s.block[0] = INT64_C(1) << 21, s.block[1] = INT64_C(1) << 21, s.block[2] = INT64_C(1) << 22; /* 2^64 threads */
  launch_sized("block past int64", s);
  s = plain;
  s.shared = INT64_MAX; /* beside 1024 static bytes */
  launch_sized("shared past int64", s);
  s = plain;
  s.grid[0] = 4, s.scratch[0] = 256, s.scratch[1] = 128;
  setenv("FAKE_CUDA_POOL_ATTR_FAILS", "1", 1); /* the scratch pool is made, then refused its release threshold */
  launch_sized("scratch pool refused", s);
  unsetenv("FAKE_CUDA_POOL_ATTR_FAILS");
  launch_sized("scratch", s);
  s.grid[0] = INT32_MAX, s.grid[1] = 65535, s.grid[2] = 65535, s.scratch[0] = 1u << 31; /* ~2^94 bytes */
  launch_sized("scratch past 64 bits", s);
  s.scratch[0] = 1, s.scratch[1] = 16, s.profile_scratch[0] = 2, s.profile_scratch[1] = 16; /* 1 + 2 bytes of ~2^63 */
  launch_sized("scratch sum past 64 bits", s);
  s = plain;
  s.desc = 1, s.shape[0] = 1, s.shape[1] = 4096, s.strides[0] = INT64_C(1) << 62, s.strides[1] = 1; /* 2^64 bytes */
  launch_sized("descriptor stride past int64", s);
  s.shape[0] = INT64_C(1) << 22, s.shape[1] = 16, s.strides[0] = INT64_C(1) << 41; /* spans 2^65 bytes */
  launch_sized("descriptor span past int64", s);
  s.desc = 2, s.shape[0] = 1, s.shape[1] = INT64_C(1) << 31, s.strides[0] = INT64_C(1) << 31;
  launch_sized("descriptor size past i32", s);
  pthread_t threads[8];
  for (int i = 0; i < 8; i++) pthread_create(&threads[i], NULL, launcher, (void *)(intptr_t)i);
  for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
  printf("threads: done\n");
  return 0;
}
