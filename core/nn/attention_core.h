// CausalAttentionCore: the part of an attention layer that mixes tokens.
// It takes the packed q|k|v of its layer (B, T, 3W: whole heads of size
// head_dim, already projected and position-encoded) and returns the
// attention (B, T, W), with the fused kernel (no T x T matrix is stored:
// the kernel keeps a logsumexp per query). Every attention layer (GPT's,
// Llama's) calls one, so a strategy that changes how tokens meet (cp's
// ring attention) swaps this module and knows no layer.
#ifndef WEFT_CORE_NN_ATTENTION_CORE_H_
#define WEFT_CORE_NN_ATTENTION_CORE_H_

#include "core/nn/module.h"

namespace weft {

class CausalAttentionCore : public Module {
 public:
  explicit CausalAttentionCore(int64_t head_dim);

  // qkv (B, T, 3W) -> (B, T, W). Refuses a sequence split over ranks
  // (ctx.sequence chunks): attending to local tokens would drop keys.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& qkv) override;
  // d(attention) (B, T, W) -> dqkv (B, T, 3W).
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dout) override;

  int64_t head_dim() const { return head_dim_; }

 private:
  const int64_t head_dim_;
  // Saved per micro-batch: (B, T, 3W), (B, T, W), (B, NH, T).
  enum { kQkv, kAttention, kLogSumExp };
};

}  // namespace weft

#endif  // WEFT_CORE_NN_ATTENTION_CORE_H_
