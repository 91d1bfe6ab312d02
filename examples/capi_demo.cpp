// Calls demo_kernels' add from C++ through its C API: no Python, no Triton, no torch.
//   g++ capi_demo.cpp -I$(python -c 'import demo_kernels; print(demo_kernels.get_include())') \
//       -L<site>/demo_kernels -ldemo_kernels -Wl,-rpath,<site>/demo_kernels -lcudart
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "demo_kernels.h"

int main() {
  const int64_t n = 1 << 20;
  std::vector<float> x(n), y(n), out(n, -1.f);
  for (int64_t i = 0; i < n; i++) x[i] = 0.5f * i, y[i] = 1.f - i;
  float *dx, *dy, *dout;
  if (cudaMalloc(&dx, n * 4) || cudaMalloc(&dy, n * 4) || cudaMalloc(&dout, n * 4)) return 2;
  cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * 4, cudaMemcpyHostToDevice);
  cudaStream_t stream;
  cudaStreamCreate(&stream);

  demo_kernels_tensor tx{(uint64_t)dx, DEMO_KERNELS_FP32, 1, &n, nullptr};
  demo_kernels_tensor ty{(uint64_t)dy, DEMO_KERNELS_FP32, 1, &n, nullptr};
  demo_kernels_tensor tout{(uint64_t)dout, DEMO_KERNELS_FP32, 1, &n, nullptr};
  char error[512], variant[256];
  if (demo_kernels_add_select(stream, 0, tx, ty, tout, nullptr, variant, sizeof variant, error, sizeof error)) {
    std::fprintf(stderr, "select failed: %s\n", error);
    return 1;
  }
  if (demo_kernels_add(stream, 0, tx, ty, tout, nullptr, error, sizeof error)) {
    std::fprintf(stderr, "add failed: %s\n", error);
    return 1;
  }
  demo_kernels_tensor small{(uint64_t)dout, DEMO_KERNELS_FP32, 1, &n, nullptr};
  int32_t too_many = (int32_t)(2 * n);  // more elements than the arrays hold: refused, not launched
  if (demo_kernels_add(stream, 0, tx, ty, small, &too_many, error, sizeof error) == 0) return 1;
  std::printf("refused as expected: %s\n", error);

  cudaMemcpyAsync(out.data(), dout, n * 4, cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  for (int64_t i = 0; i < n; i++)
    if (out[i] != x[i] + y[i]) {
      std::fprintf(stderr, "wrong at %lld: %f\n", (long long)i, out[i]);
      return 1;
    }
  std::printf("ok: %s\n", variant);
  return 0;
}
