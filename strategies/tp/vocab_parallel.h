// Vocabulary-parallel embedding, LM head and cross-entropy: each tp rank
// holds rows [r * Vp/tp, (r+1) * Vp/tp) of the token table (Shard(0)@tp)
// and the same columns of the logits, which are never gathered whole.
// When tp does not divide the model's padded vocabulary Vp, each rank
// holds ceil(Vp/tp) rows (PaddedShard(0)@tp): the last rank stores zero
// rows past Vp that no token looks up and whose logits the loss masks like
// the model's own padding (columns >= the real vocabulary), so they never
// change a loss or a gradient; exports and checkpoints keep Vp rows.
//
//   VocabParallelEmbedding  each rank looks up the tokens it holds (zeros
//       for the others), rank 0 adds the positions, and the partial sums
//       leave the region (all-reduce; reduce-scatter along T under sp).
//   VocabParallelHead       logits (N, Vp/tp) = h W_local^T with h entering
//       the region whole; tied, it reads the embedding's sharded table.
//   VocabParallelCrossEntropy  per row: the max, the sum of exp(z - max)
//       and the target's logit are reduced across tp (one all-reduce of the
//       max, one of the sum and the target logit; each rank's sum is first
//       rescaled from its own max to the global one), so every rank gets the
//       whole loss and the gradient of its own columns. The kernels are
//       KernelOps::VocabCrossEntropy* (CPU and CUDA).
#ifndef WEFT_STRATEGIES_TP_VOCAB_PARALLEL_H_
#define WEFT_STRATEGIES_TP_VOCAB_PARALLEL_H_

#include "core/nn/loss.h"
#include "core/nn/module.h"
#include "strategies/tp/tp_comm.h"

namespace weft::tp {

// Rows of a `rows`-row table each of `tp` ranks stores: ceil(rows / tp).
int64_t VocabRowsPerRank(int64_t rows, int tp);
// An error when padded blocks would leave a tp rank no row of the table.
absl::Status CheckVocab(int64_t rows, int tp);

class VocabParallelEmbedding : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<VocabParallelEmbedding>> Create(
      int64_t vocab_rows, int64_t max_positions, int64_t channels, InitSpec wte_init,
      InitSpec wpe_init, TpComm tp);

  // tokens (B, T) i32 -> (B, T, C), or (B, T/tp, C) under sp.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& tokens) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  Parameter* wte() const { return wte_; }
  Parameter* wpe() const { return wpe_; }

 private:
  // wpe's rows for the tokens' positions: wpe itself for a whole sequence,
  // the rows of each context-parallel chunk stacked otherwise.
  absl::StatusOr<Tensor> PositionRows(RunContext& ctx, int64_t t) const;
  VocabParallelEmbedding(int64_t max_positions, TpComm tp)
      : Module("VocabParallelEmbedding"), max_positions_(max_positions), tp_(std::move(tp)) {}

  const int64_t max_positions_;
  const TpComm tp_;
  Parameter* wte_ = nullptr;
  Parameter* wpe_ = nullptr;
};

class VocabParallelHead : public Module {
 public:
  // Untied: registers "weight" (vocab_rows, channels), Shard(0)@tp.
  static absl::StatusOr<std::unique_ptr<VocabParallelHead>> Create(int64_t vocab_rows,
                                                                   int64_t channels,
                                                                   InitSpec init, TpComm tp);
  // Tied to a table sharded the same way, owned by another module.
  VocabParallelHead(Parameter* table, TpComm tp);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& h) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dlogits) override;
  std::vector<Parameter*> BorrowedParameters() const override {
    return tied_ ? std::vector<Parameter*>{weight_} : std::vector<Parameter*>{};
  }

 private:
  explicit VocabParallelHead(TpComm tp) : Module("VocabParallelHead"), tp_(std::move(tp)) {}

  const TpComm tp_;
  Parameter* weight_ = nullptr;
  bool tied_ = false;
};

class VocabParallelCrossEntropy : public LossModule {
 public:
  // `vocab` real classes out of `padded_vocab` columns split over tp, each
  // rank holding VocabRowsPerRank(padded_vocab, tp) of them.
  VocabParallelCrossEntropy(int64_t vocab, int64_t padded_vocab, TpComm tp);

  // logits (N, Vp/tp): this rank's columns; losses (N) whole on every rank.
  absl::StatusOr<Tensor> ComputeLoss(RunContext& ctx, const Tensor& logits, const Tensor& targets,
                                     float dloss_scale) override;

 private:
  const int64_t vocab_;
  const int64_t local_columns_;
  const TpComm tp_;
};

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_VOCAB_PARALLEL_H_
