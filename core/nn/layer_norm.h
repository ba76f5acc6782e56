// LayerNorm over the last dimension (weight 1, bias 0 at init), or its
// root-mean-square form (NormKind::kRms, Llama's RMSNorm: no mean, no bias).
// One class for both so every strategy that treats a norm specially (tp's
// sequence parallelism sums its gradients) treats both alike.
//
// Transformer blocks use the fused entry points: ForwardResidual computes
// residual = a + b and its normalization in one kernel; BackwardResidual
// writes residual gradient + input gradient into a new tensor (the residual
// gradient is only read, so a caller's dy needs no copy), and
// BackwardAccumulate adds the input gradient onto a residual gradient the
// caller owns. All fire the module's hooks.
#ifndef WEFT_CORE_NN_LAYER_NORM_H_
#define WEFT_CORE_NN_LAYER_NORM_H_

#include <utility>

#include "core/nn/module.h"

namespace weft {

enum class NormKind { kLayer, kRms };

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t features, float eps = 1e-5f, NormKind kind = NormKind::kLayer);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  // Returns {a + b, layernorm(a + b)}.
  absl::StatusOr<std::pair<Tensor, Tensor>> ForwardResidual(RunContext& ctx, const Tensor& a,
                                                            const Tensor& b);
  // Returns residual_grad + dL/dx; residual_grad is left unchanged.
  absl::StatusOr<Tensor> BackwardResidual(RunContext& ctx, const Tensor& dy,
                                          const Tensor& residual_grad);
  // dx_accum += dL/dx.
  absl::Status BackwardAccumulate(RunContext& ctx, const Tensor& dy, Tensor& dx_accum);

  Parameter* weight() const { return weight_; }
  Parameter* bias() const { return bias_; }  // null for kRms
  NormKind kind() const { return kind_; }

 private:
  // Allocates out, mean and rstd, and saves x/mean/rstd when training.
  absl::Status Normalize(RunContext& ctx, const Tensor& x, Tensor& out, Tensor& mean,
                         Tensor& rstd);
  // dx = residual + dL/dx (residual undefined: dL/dx; it may be dx).
  absl::Status Gradient(RunContext& ctx, const Tensor& dy, Tensor& dx, const Tensor& residual);

  const int64_t c_;
  const float eps_;
  const NormKind kind_;
  Parameter* weight_;
  Parameter* bias_;
  enum { kInput, kMean, kRstd };  // saved per micro-batch
};

}  // namespace weft

#endif  // WEFT_CORE_NN_LAYER_NORM_H_
