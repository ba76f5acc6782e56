// RingAttention: causal self-attention over a sequence split across the cp
// ranks, swapped in by the cp strategy for each CausalSelfAttention (same
// qkv, proj and residual dropout, so parameter names and values, and the
// dropout masks' keys, are unchanged).
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
  // qkv: (B, T, C) -> (B, T, 3C); proj, dropout: (B, T, C) -> (B, T, C).
  // The dropout draws the masks of the rank's chunks' global positions
  // (core/nn/dropout.h).
  RingAttention(std::unique_ptr<Module> qkv, std::unique_ptr<Module> proj,
                std::unique_ptr<Module> dropout, int64_t channels, int num_heads,
                std::shared_ptr<Ring> ring);

  // x: (B, T_local, C), the rank's chunks of ctx.sequence, or under
  // sequence parallelism this tp rank's block of them, (B, T_local/tp, C):
  // the column-parallel qkv gathers the chunks whole (with this rank's
  // heads) and the row-parallel proj scatters them back, so the ring always
  // attends over whole chunks and the output has the input's shape.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

 private:
  // Heads among `local_channels` of q (all of them without tp).
  int LocalHeads(int64_t local_channels) const;
  const int64_t c_;
  const int num_heads_;
  std::shared_ptr<Ring> ring_;
  // Saved per micro-batch: (B, T, 3C), (B, T, 2C), (B, T, C), (B, NH, T).
  enum { kQkv, kKv, kOut, kLogSumExp };
  // Ring tags: one per kind of exchange, so a mismatch cannot pair them.
  enum { kTagKvForward = 1, kTagKvBackward = 2, kTagDkv = 3 };
};

// Swaps every CausalSelfAttention under `root` for RingAttention over the
// same qkv, proj and dropout layers; returns how many.
absl::StatusOr<int> SwapInRingAttention(Module& root, const std::shared_ptr<Ring>& ring);

}  // namespace weft::cp

#endif  // WEFT_STRATEGIES_CP_RING_ATTENTION_H_
