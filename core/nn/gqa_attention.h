// GroupedQueryAttention (Llama): q, k and v projections without bias,
// rotary position embeddings on q and k, n_kv_heads K/V heads each shared
// by n_heads / n_kv_heads query heads, the attention core (attention_core.h)
// and an output projection. n_kv_heads == n_heads is plain multi-head
// attention. With qk_norm (Qwen3) q and k are RMS-normalised per head
// before the rotation, by weights of head_dim shared by every head. Tokens
// sit at positions 0..T-1, or at ctx.sequence's global
// positions when the rank holds chunks of each sequence (context
// parallelism, whose ring attention takes over the core).
//
// q, k, v and proj are swappable: tensor parallelism splits q, k and v by
// output features (whole heads: rank r keeps query heads and the K/V heads
// of their groups) and proj by input features; q_norm and k_norm stay
// whole, their gradients summed over the ranks' heads.
#ifndef WEFT_CORE_NN_GQA_ATTENTION_H_
#define WEFT_CORE_NN_GQA_ATTENTION_H_

#include <memory>

#include "core/nn/module.h"
#include "core/nn/rope.h"

namespace weft {

struct GqaAttentionConfig {
  int64_t channels = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int64_t head_dim = 0;
  float init_std = 0.02f;
  float proj_init_std = 0.02f;
  bool qk_norm = false;
  float norm_eps = 1e-6f;
};

class GroupedQueryAttention : public Module {
 public:
  // config is validated by the model (heads, groups, head size).
  GroupedQueryAttention(const GqaAttentionConfig& config, std::shared_ptr<RopeTable> rope);

  // x: (B, T, C) -> (B, T, C).
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  const GqaAttentionConfig& config() const { return config_; }

 private:
  const GqaAttentionConfig config_;
  std::shared_ptr<RopeTable> rope_;
  // Where the tokens of a (B, T, ...) activation sit in their sequence.
  absl::StatusOr<TokenChunks> Positions(const RunContext& ctx, int64_t t) const;
  // q or k (B, T, heads x D) through its per-head norm, or as it is.
  absl::StatusOr<Tensor> NormHeads(RunContext& ctx, const char* norm, const Tensor& x);
  absl::StatusOr<Tensor> NormHeadsBackward(RunContext& ctx, const char* norm, const Tensor& dy);
};

}  // namespace weft

#endif  // WEFT_CORE_NN_GQA_ATTENTION_H_
