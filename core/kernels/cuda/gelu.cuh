// GELU with the tanh approximation (GPT-2's), shared by the elementwise
// kernels and the matmul epilogue fallbacks so both compute identical bits.
#ifndef WEFT_CORE_KERNELS_CUDA_GELU_CUH_
#define WEFT_CORE_KERNELS_CUDA_GELU_CUH_

namespace weft::cuda {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float Gelu(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

// d gelu(x) / dx.
__device__ __forceinline__ float GeluGrad(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  const float th = tanhf(u);
  const float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_GELU_CUH_
