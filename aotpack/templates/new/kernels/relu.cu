// out = max(x, 0), element-wise. The recipe's defines reach nvcc as -D macros (THREADS here).
#include <cuda_fp16.h>

template <typename T>
__global__ void relu(const T *__restrict__ x, T *__restrict__ out, int n) {
  long i = (long)blockIdx.x * THREADS + threadIdx.x;
  if (i < n) {
    float v = (float)x[i];
    out[i] = (T)(v > 0.f ? v : 0.f);
  }
}
