/* Drives the shipped runtime and the generated C of the tests' small recipe through the package's C
 * API, built under AddressSanitizer and UndefinedBehaviorSanitizer (test_sanitize.py): good calls,
 * every kind of bad call, and eight threads launching at once, on the fake driver. One line per call. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

#include "small_kernels.h"

#define A 0x100000000ULL

static void call(const char *what, small_kernels_tensor x, small_kernels_tensor y, small_kernels_tensor out,
                 const int32_t *n) {
  char error[512] = "", variant[256] = "";
  int rc = small_kernels_add_select(NULL, 0, x, y, out, n, variant, sizeof variant, error, sizeof error);
  if (rc == 0) rc = small_kernels_add(NULL, 0, x, y, out, n, error, sizeof error);
  printf("%s: %s\n", what, rc == 0 ? variant : error);
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
  pthread_t threads[8];
  for (int i = 0; i < 8; i++) pthread_create(&threads[i], NULL, launcher, (void *)(intptr_t)i);
  for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
  printf("threads: done\n");
  return 0;
}
