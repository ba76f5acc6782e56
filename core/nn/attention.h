// CausalSelfAttention: qkv projection, the attention core (fused causal
// attention, attention_core.h), output projection and residual dropout.
// GPT-2 layout and naming. The fused kernel drops no attention
// probabilities: the residual dropout is the layer's only one.
#ifndef WEFT_CORE_NN_ATTENTION_H_
#define WEFT_CORE_NN_ATTENTION_H_

#include "core/nn/attention_core.h"
#include "core/nn/dropout.h"
#include "core/nn/linear.h"
#include "core/nn/module.h"

namespace weft {

class CausalSelfAttention : public Module {
 public:
  // proj_init_std: GPT-2 scales the residual projection by 1/sqrt(2 * layers).
  CausalSelfAttention(int64_t channels, int num_heads, float init_std, float proj_init_std,
                      float dropout);

  // x: (B, T, C) -> (B, T, C).
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  int num_heads() const { return num_heads_; }
  int64_t channels() const { return c_; }

 private:
  const int64_t c_;
  const int num_heads_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_ATTENTION_H_
