// RingAttention: the attention core (core/nn/attention_core.h) over a
// sequence split across the cp ranks, swapped in by the cp strategy for
// every CausalAttentionCore. The layer around it (GPT's qkv, proj and
// dropout; Llama's q, k, v with rotary positions at the chunks' global
// places, and proj) stays as it is, so parameters, names and dropout keys
// are unchanged and cp knows no model's attention.
//
// Forward: every rank holds the queries and the K/V block of its two zigzag
// chunks (RunContext::sequence). The K/V blocks travel cp - 1 steps around
// the ring; while block s+1 is in flight the rank attends to block s and
// merges it into its running (out, lse) by the log-sum-exp rule.
// Backward: the K/V blocks travel the ring again. Each rank adds its
// queries' share of the gradient of block s into a dK/dV buffer that
// travels one step behind the block, so after cp steps every block's
// dK/dV, summed over all ranks' queries, is back at its owner.
// Per layer and micro-batch each rank sends (and receives) cp - 1 K/V blocks
// forward, cp - 1 K/V blocks and cp dK/dV blocks backward.
#ifndef WEFT_STRATEGIES_CP_RING_ATTENTION_H_
#define WEFT_STRATEGIES_CP_RING_ATTENTION_H_

#include <memory>

#include "core/nn/module.h"
#include "strategies/cp/ring.h"

namespace weft::cp {

class RingAttention : public Module {
 public:
  RingAttention(int64_t head_dim, std::shared_ptr<Ring> ring);

  // qkv: (B, T_local, 3W), the packed q|k|v of the rank's chunks of
  // ctx.sequence (whole chunks: under sequence parallelism the layer's
  // column-parallel projections gather them, with this rank's heads) ->
  // the attention (B, T_local, W).
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& qkv) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dout) override;

 private:
  const int64_t head_dim_;
  std::shared_ptr<Ring> ring_;
  // Saved per micro-batch: (B, T, 3C), (B, T, 2C), (B, T, C), (B, NH, T).
  enum { kQkv, kKv, kOut, kLogSumExp };
  // Ring tags: one per kind of exchange, so a mismatch cannot pair them.
  enum { kTagKvForward = 1, kTagKvBackward = 2, kTagDkv = 3 };
};

// Swaps every CausalAttentionCore under `root` for RingAttention; returns
// how many.
absl::StatusOr<int> SwapInRingAttention(Module& root, const std::shared_ptr<Ring>& ring);

}  // namespace weft::cp

#endif  // WEFT_STRATEGIES_CP_RING_ATTENTION_H_
