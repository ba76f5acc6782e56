// CausalSelfAttention: qkv projection, fused causal attention (no T x T
// matrix is stored: the kernel keeps a logsumexp per query), output
// projection and residual dropout. GPT-2 layout and naming. The fused
// kernel drops no attention probabilities: the residual dropout is the
// layer's only one.
#ifndef WEFT_CORE_NN_ATTENTION_H_
#define WEFT_CORE_NN_ATTENTION_H_

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
  // Heads in `local_channels` of q (all of them unless qkv is sharded).
  int LocalHeads(int64_t local_channels) const;

  const int64_t c_;
  const int num_heads_;
  // Saved per micro-batch: (B, T, 3C), (B, T, C), (B, NH, T).
  enum { kQkv, kAttention, kLogSumExp };
};

}  // namespace weft

#endif  // WEFT_CORE_NN_ATTENTION_H_
