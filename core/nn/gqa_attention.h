// GroupedQueryAttention (Llama): q, k and v projections without bias,
// rotary position embeddings on q and k, n_kv_heads K/V heads each shared
// by n_heads / n_kv_heads query heads, the fused causal attention kernel,
// and an output projection. n_kv_heads == n_heads is plain multi-head
// attention. Tokens sit at positions 0..T-1. A sequence split over ranks
// (context parallelism) is refused: cp's ring attention does not yet take
// over this layer.
//
// q, k, v and proj are swappable: tensor parallelism splits q, k and v by
// output features (whole heads: rank r keeps query heads and the K/V heads
// of their groups) and proj by input features.
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
  // Saved per micro-batch: packed (B, T, 3*H*D), attention (B, T, H*D),
  // logsumexp (B, H, T).
  enum { kQkv, kAttention, kLogSumExp };
};

}  // namespace weft

#endif  // WEFT_CORE_NN_GQA_ATTENTION_H_
