// Dropout through DropoutCursor (core/kernels/philox.h), shared with the
// CPU reference so the masks are identical: one Philox evaluation serves
// four consecutive elements of a sample.
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/dropout.h"
#include "core/kernels/philox.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T, int V>
__global__ void DropoutKernel(T* out, const T* x, int64_t n, float p, float keep_scale,
                              DropoutKey key) {
  key.seed = ResolvedSeed(key);
  key.seed_in_memory = nullptr;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * V;
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V; i < n; i += stride) {
    float f[V];
    LoadF<V>(x + i, f);
    // One division per V elements: the cursor steps across sample ends.
    DropoutCursor at(key, static_cast<uint64_t>(i));
#pragma unroll
    for (int k = 0; k < V; ++k, at.Next()) f[k] = at.Keep(p) ? f[k] * keep_scale : 0.0f;
    StoreF<V>(out + i, f);
  }
}

template <typename T>
absl::Status LaunchT(T* out, const T* x, int64_t n, float p, const DropoutKey& key,
                     cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  const float keep_scale = 1.0f / (1.0f - p);  // same expression as the CPU reference
  if (n % V == 0 && Aligned16(out) && Aligned16(x)) {
    DropoutKernel<T, V><<<GridFor(n / V, kThreads), kThreads, 0, stream>>>(out, x, n, p,
                                                                           keep_scale, key);
  } else {
    DropoutKernel<T, 1><<<GridFor(n, kThreads), kThreads, 0, stream>>>(out, x, n, p, keep_scale,
                                                                       key);
  }
  return CheckLaunch("DropoutKernel");
}

}  // namespace

absl::Status LaunchDropout(void* out, const void* x, DType dtype, int64_t n, float p,
                           const DropoutKey& key, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  if (dtype == DType::kF32) {
    return LaunchT(static_cast<float*>(out), static_cast<const float*>(x), n, p, key,
                   stream);
  }
  return LaunchT(static_cast<bf16*>(out), static_cast<const bf16*>(x), n, p, key,
                 stream);
}

}  // namespace weft::cuda
