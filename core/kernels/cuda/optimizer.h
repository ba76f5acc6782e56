// Multi-tensor AdamW and SGD (momentum, Nesterov): every segment is updated
// by one launch per 64 segments (see multi_tensor.cuh), in f32 on the master
// weights, then the compute-dtype parameter copy is refreshed (bf16 rounds to
// nearest even). The clipping coefficient is computed on the device from
// grad_norm_sq, so clipping needs no host sync:
//   g = grad * grad_scale * min(1, max_grad_norm / (sqrt(grad_norm_sq) + 1e-6))
// (the factor is 1 when max_grad_norm <= 0). The update formulas follow the
// CPU reference (core/kernels/cpu/optimizers.cc) term for term.
#ifndef WEFT_CORE_KERNELS_CUDA_OPTIMIZER_H_
#define WEFT_CORE_KERNELS_CUDA_OPTIMIZER_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

struct OptimizerTensor {
  float* master = nullptr;      // f32 weights (n)
  void* param = nullptr;        // refreshed copy, or null
  DType param_dtype = DType::kF32;
  const void* grad = nullptr;   // kF32 or kBF16 (n)
  DType grad_dtype = DType::kF32;
  float* exp_avg = nullptr;     // AdamW first moment / SGD momentum buffer (null: no momentum)
  float* exp_avg_sq = nullptr;  // AdamW second moment
  int64_t n = 0;
  bool weight_decay = true;
};

struct AdamWConfig {
  float lr, beta1, beta2, eps, weight_decay, grad_scale, max_grad_norm;
  float bias_correction1;  // 1 - beta1^step
  float bias_correction2;  // 1 - beta2^step
  const float* grad_norm_sq;  // device, one f32; read only when max_grad_norm > 0
  // Null, or device [lr, bias_correction1, bias_correction2] read by the
  // kernel in place of the three fields (a replayed CUDA graph).
  const float* step_scalars;
};

struct SgdConfig {
  float lr, momentum, weight_decay, grad_scale, max_grad_norm;
  bool nesterov;
  const float* grad_norm_sq;
  const float* step_scalars;  // null, or device [lr] read in place of lr
};

absl::Status LaunchAdamW(absl::Span<const OptimizerTensor> tensors, const AdamWConfig& config,
                         cudaStream_t stream);
absl::Status LaunchSgd(absl::Span<const OptimizerTensor> tensors, const SgdConfig& config,
                       cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_OPTIMIZER_H_
