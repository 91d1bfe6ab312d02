// RMSNorm over the last dimension: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight.
// One block of THREADS threads per row. The variant aotpack builds with AOTPACK_HINTED=1 runs only when
// the pointers are 16-byte aligned and n_cols is a multiple of 16 (the recipe's ':16' hints), so it
// moves 16-byte vectors; the other variant reads element by element. (The recipe passes its defines
// as -D macros too, so the template parameter is not named after the define BLOCK.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#ifndef AOTPACK_HINTED
#define AOTPACK_HINTED 0
#endif

template <typename T> __device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }

template <int THREADS> __device__ float block_sum(float v) {
  __shared__ float warp_sums[THREADS / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int w = 0; w < THREADS / 32; w++) total += warp_sums[w];
  return total;
}

template <typename T, int THREADS>
__global__ void __launch_bounds__(THREADS) rmsnorm(T *__restrict__ out, const T *__restrict__ x,
                                                 const T *__restrict__ weight, float eps, int n_cols) {
  const long row = blockIdx.x;
  const T *in = x + row * n_cols;
  T *dst = out + row * n_cols;
  constexpr int VEC = 16 / sizeof(T);
  float sum_sq = 0.f;
  if (AOTPACK_HINTED) {
    using Vec = uint4;
    for (int c = threadIdx.x * VEC; c < n_cols; c += THREADS * VEC) {
      Vec raw = *reinterpret_cast<const Vec *>(in + c);
      const T *vals = reinterpret_cast<const T *>(&raw);
#pragma unroll
      for (int i = 0; i < VEC; i++) sum_sq += to_float(vals[i]) * to_float(vals[i]);
    }
  } else {
    for (int c = threadIdx.x; c < n_cols; c += THREADS) sum_sq += to_float(in[c]) * to_float(in[c]);
  }
  const float scale = rsqrtf(block_sum<THREADS>(sum_sq) / n_cols + eps);
  if (AOTPACK_HINTED) {
    using Vec = uint4;
    for (int c = threadIdx.x * VEC; c < n_cols; c += THREADS * VEC) {
      Vec raw = *reinterpret_cast<const Vec *>(in + c), w = *reinterpret_cast<const Vec *>(weight + c), res;
      const T *vals = reinterpret_cast<const T *>(&raw), *ws = reinterpret_cast<const T *>(&w);
      T *outs = reinterpret_cast<T *>(&res);
#pragma unroll
      for (int i = 0; i < VEC; i++) outs[i] = from_float<T>(to_float(vals[i]) * scale * to_float(ws[i]));
      *reinterpret_cast<Vec *>(dst + c) = res;
    }
  } else {
    for (int c = threadIdx.x; c < n_cols; c += THREADS)
      dst[c] = from_float<T>(to_float(in[c]) * scale * to_float(weight[c]));
  }
}
