// TokenPositionEmbedding: out (B, T, C) = wte[tokens] + wpe[0..T), or
// wpe at the global positions of ctx.sequence when the rank holds chunks.
// max_positions 0: no position table (positions enter elsewhere: RoPE).
// The token table may be shared with an output head (weight tying): the
// head reads wte() and accumulates into the same gradient.
#ifndef WEFT_CORE_NN_EMBEDDING_H_
#define WEFT_CORE_NN_EMBEDDING_H_

#include "core/nn/module.h"

namespace weft {

class TokenPositionEmbedding : public Module {
 public:
  TokenPositionEmbedding(int64_t vocab_rows, int64_t max_positions, int64_t channels,
                         float init_std = 0.02f);

  // tokens: (B, T) i32. Returns (B, T, C).
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& tokens) override;
  // Accumulates wte/wpe gradients; returns an undefined tensor (ids have none).
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  Parameter* wte() const { return wte_; }
  Parameter* wpe() const { return wpe_; }  // null without a position table

 private:
  // Tokens at the global positions of ctx.sequence (context parallelism).
  absl::StatusOr<Tensor> ForwardChunks(RunContext& ctx, const Tensor& tokens,
                                       const TokenChunks& chunks);
  absl::Status BackwardChunks(RunContext& ctx, const Tensor& dy, const Tensor& tokens,
                              const TokenChunks& chunks);

  const int64_t max_positions_;
  Parameter* wte_;
  Parameter* wpe_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_EMBEDDING_H_
