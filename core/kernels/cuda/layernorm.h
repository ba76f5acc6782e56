// Launchers for layernorm and RMSNorm forward (plain and fused with the
// residual add) and backward over rows of C channels. Activations, weight and bias share the
// compute dtype (kF32 or kBF16); statistics are f32; parameter gradients are
// kF32 or kBF16 and accumulate (+=). Pointers are device memory on the
// current device. bias/dbias may be null (no bias).
#ifndef WEFT_CORE_KERNELS_CUDA_LAYERNORM_H_
#define WEFT_CORE_KERNELS_CUDA_LAYERNORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

// out (rows, C) = (x - mean) * rstd * weight + bias; mean, rstd (rows) f32.
absl::Status LaunchLayerNormForward(void* out, float* mean, float* rstd, const void* x,
                                    const void* weight, const void* bias, DType dtype,
                                    int64_t rows, int64_t channels, float eps,
                                    cudaStream_t stream);

// residual_out = a + b (rounded to dtype), then layernorm of residual_out as
// stored, so backward sees exactly the input forward normalized.
absl::Status LaunchResidualLayerNormForward(void* residual_out, void* out, float* mean,
                                            float* rstd, const void* a, const void* b,
                                            const void* weight, const void* bias, DType dtype,
                                            int64_t rows, int64_t channels, float eps,
                                            cudaStream_t stream);

// Floats of device scratch LaunchLayerNormBackward needs.
int64_t LayerNormBackwardScratchFloats(int64_t rows, int64_t channels);
// Widest C the backward takes (its per-warp partials live in shared memory).
int64_t LayerNormBackwardMaxChannels();

// dx = residual + the input gradient (residual null: the input gradient);
// dweight += sum over rows of dy * xhat; dbias += sum over rows of dy.
// residual may be dx (accumulate) and dx may be dy. One pass over dy and x,
// then a finish over per-block partial rows; deterministic (fixed order,
// no atomics). dbias may be null.
absl::Status LaunchLayerNormBackward(void* dx, void* dweight, void* dbias, DType grad_dtype,
                                     const void* dy, const void* residual, const void* x,
                                     const void* weight, const float* mean, const float* rstd,
                                     DType dtype, int64_t rows, int64_t channels, float* scratch,
                                     cudaStream_t stream);

// RMSNorm: out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps) (f32,
// rows). b non-null: x is residual_out = a + b, as in
// LaunchResidualLayerNormForward; b null: x is a, residual_out untouched.
absl::Status LaunchRmsNormForward(void* residual_out, void* out, float* rstd, const void* a,
                                  const void* b, const void* weight, DType dtype, int64_t rows,
                                  int64_t channels, float eps, cudaStream_t stream);

// The RMSNorm backward's scratch and widest C (one partial row per block,
// not two: there is no dbias).
int64_t RmsNormBackwardScratchFloats(int64_t rows, int64_t channels);
int64_t RmsNormBackwardMaxChannels();

// dx = residual + the input gradient, dweight += sum over rows of
// dy * x * rstd; aliasing, one pass and determinism as the layernorm's.
absl::Status LaunchRmsNormBackward(void* dx, void* dweight, DType grad_dtype, const void* dy,
                                   const void* residual, const void* x, const void* weight,
                                   const float* rstd, DType dtype, int64_t rows,
                                   int64_t channels, float* scratch, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_LAYERNORM_H_
