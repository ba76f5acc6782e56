// LayerNorm over the last dimension (weight 1, bias 0 at init).
//
// Transformer blocks use the fused entry points: ForwardResidual computes
// residual = a + b and its normalization in one kernel, and
// BackwardAccumulate adds the input gradient onto an existing residual
// gradient instead of allocating a new one. Both fire the module's hooks.
#ifndef WEFT_CORE_NN_LAYER_NORM_H_
#define WEFT_CORE_NN_LAYER_NORM_H_

#include <utility>

#include "core/nn/module.h"

namespace weft {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t features, float eps = 1e-5f);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  // Returns {a + b, layernorm(a + b)}.
  absl::StatusOr<std::pair<Tensor, Tensor>> ForwardResidual(RunContext& ctx, const Tensor& a,
                                                            const Tensor& b);
  // dx_accum += dL/dx.
  absl::Status BackwardAccumulate(RunContext& ctx, const Tensor& dy, Tensor& dx_accum);

  Parameter* weight() const { return weight_; }
  Parameter* bias() const { return bias_; }

 private:
  // Allocates out, mean and rstd, and saves x/mean/rstd when training.
  absl::Status Normalize(RunContext& ctx, const Tensor& x, Tensor& out, Tensor& mean,
                         Tensor& rstd);
  absl::Status Gradient(RunContext& ctx, const Tensor& dy, Tensor& dx, bool accumulate);

  const int64_t c_;
  const float eps_;
  Parameter* weight_;
  Parameter* bias_;
  enum { kInput, kMean, kRstd };  // saved per micro-batch
};

}  // namespace weft

#endif  // WEFT_CORE_NN_LAYER_NORM_H_
