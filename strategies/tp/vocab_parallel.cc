#include "strategies/tp/vocab_parallel.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/tp/parallel_linear.h"
#include "strategies/tp/region_ops.h"

namespace weft::tp {
namespace {

// Even blocks when tp divides the rows, else padded ones (see the header).
absl::Status ShardRows(Parameter* p, const TpComm& tp) {
  Placement placement;
  if (p->global_shape()[0] % tp.size() == 0) {
    placement.Shard("tp", 0, tp.rank(), tp.size());
  } else {
    placement.PaddedShard("tp", tp.rank(), tp.size());
  }
  return p->SetPlacement(std::move(placement));
}

}  // namespace

int64_t VocabRowsPerRank(int64_t rows, int tp) { return (rows + tp - 1) / tp; }

absl::Status CheckVocab(int64_t rows, int tp) {
  const int64_t block = VocabRowsPerRank(rows, tp);
  if ((tp - 1) * block < rows) return absl::OkStatus();
  return InvalidArgument(
      absl::StrCat("a vocabulary of ", rows, " rows split over tp=", tp, " in blocks of ", block,
                   " rows leaves tp rank ", tp - 1, " only padding"),
      absl::StrCat("at least ", (tp - 1) * block + 1, " vocabulary rows, so that every tp rank "
                   "holds some"),
      "lower --tp, or raise the model's vocab_pad_multiple to a multiple of tp");
}

absl::StatusOr<std::unique_ptr<VocabParallelEmbedding>> VocabParallelEmbedding::Create(
    int64_t vocab_rows, int64_t max_positions, int64_t channels, InitSpec wte_init,
    InitSpec wpe_init, TpComm tp) {
  WEFT_RETURN_IF_ERROR(CheckVocab(vocab_rows, tp.size()));
  std::unique_ptr<VocabParallelEmbedding> m(new VocabParallelEmbedding(max_positions, tp));
  m->wte_ = m->RegisterParameter("wte", {vocab_rows, channels}, wte_init, true);
  WEFT_RETURN_IF_ERROR(ShardRows(m->wte_, tp));
  // max_positions 0: no position table (rotary positions, in attention).
  if (max_positions > 0) {
    m->wpe_ = m->RegisterParameter("wpe", {max_positions, channels}, wpe_init, true);
  }
  return m;
}

absl::StatusOr<Tensor> VocabParallelEmbedding::PositionRows(RunContext& ctx, int64_t t) const {
  if (wpe_ == nullptr) return Tensor();
  if (!ctx.sequence.has_value() || ctx.sequence->IsIdentity()) return wpe_->value;
  const TokenChunks& chunks = *ctx.sequence;
  if (chunks.size() != t) {
    return InvalidArgument(absl::StrCat("a sequence chunk of ", t, " tokens"),
                           absl::StrCat(chunks.size(), " tokens (", chunks.count, " chunks)"));
  }
  const int64_t len = chunks.chunk_len;
  WEFT_ASSIGN_OR_RETURN(Tensor pe, ctx.Empty({t, wpe_->shape()[1]}, wpe_->value.dtype()));
  for (int i = 0; i < chunks.count; ++i) {
    if (chunks.offsets[i] < 0 || chunks.offsets[i] + len > max_positions_) {
      return InvalidArgument(absl::StrCat("sequence chunk at position ", chunks.offsets[i]),
                             absl::StrCat("positions below max_seq_len=", max_positions_));
    }
    Tensor dst = pe.Slice(0, i * len, (i + 1) * len);
    WEFT_RETURN_IF_ERROR(
        dst.CopyFrom(wpe_->value.Slice(0, chunks.offsets[i], chunks.offsets[i] + len), ctx.stream));
  }
  return pe;
}

absl::StatusOr<Tensor> VocabParallelEmbedding::Forward(RunContext& ctx, const Tensor& tokens) {
  if (tokens.ndim() != 2 || tokens.dtype() != DType::kI32) {
    return InvalidArgument("tokens " + tokens.DebugString(), "an i32 tensor (B, T)");
  }
  if (wpe_ != nullptr && tokens.dim(1) > max_positions_) {
    return InvalidArgument(absl::StrCat("sequence length ", tokens.dim(1)),
                           absl::StrCat("at most max_seq_len=", max_positions_),
                           "lower seq_len or raise max_seq_len");
  }
  if (ctx.training) ctx.Saved(this)[0] = tokens;
  const int64_t c = wte_->shape()[1];
  WEFT_ASSIGN_OR_RETURN(Tensor partial,
                        ctx.Empty({tokens.dim(0), tokens.dim(1), c}, ctx.compute_dtype));
  // Positions once in the sum: rank 0 adds them. Context-parallel chunks
  // take the rows of their global positions, stacked.
  Tensor pe;
  if (tp_.rank() == 0) {
    WEFT_ASSIGN_OR_RETURN(pe, PositionRows(ctx, tokens.dim(1)));
  }
  WEFT_RETURN_IF_ERROR(ctx.ops->VocabEmbeddingForward(ctx.kernel(), partial, tokens, wte_->value,
                                                      wte_->local_offsets()[0], pe));
  return LeaveRowRegion(tp_, ctx, partial);
}

absl::StatusOr<Tensor> VocabParallelEmbedding::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("embedding backward without saved tokens",
                              "Forward in training mode before Backward");
  }
  // The whole output gradient: wpe's gradient is then the same on every rank.
  WEFT_ASSIGN_OR_RETURN(Tensor whole, LeaveRowRegionBackward(tp_, ctx, dy));
  if (wpe_ == nullptr) {
    Tensor no_positions;
    WEFT_RETURN_IF_ERROR(ctx.ops->VocabEmbeddingBackward(ctx.kernel(), wte_->grad, no_positions,
                                                         whole, (*saved)[0],
                                                         wte_->local_offsets()[0]));
  } else if (!ctx.sequence.has_value() || ctx.sequence->IsIdentity()) {
    WEFT_RETURN_IF_ERROR(ctx.ops->VocabEmbeddingBackward(ctx.kernel(), wte_->grad, wpe_->grad,
                                                         whole, (*saved)[0],
                                                         wte_->local_offsets()[0]));
  } else {
    // Position gradients per local token, then added at the chunks' rows.
    const TokenChunks& chunks = *ctx.sequence;
    const int64_t len = chunks.chunk_len;
    WEFT_ASSIGN_OR_RETURN(Tensor dpe, ctx.Zeros({chunks.size(), wpe_->shape()[1]},
                                                wpe_->grad.dtype()));
    WEFT_RETURN_IF_ERROR(ctx.ops->VocabEmbeddingBackward(ctx.kernel(), wte_->grad, dpe, whole,
                                                         (*saved)[0], wte_->local_offsets()[0]));
    for (int i = 0; i < chunks.count; ++i) {
      Tensor g = wpe_->grad.Slice(0, chunks.offsets[i], chunks.offsets[i] + len);
      WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), g, g, dpe.Slice(0, i * len, (i + 1) * len)));
    }
  }
  ctx.DropSaved(this);
  return Tensor();
}

absl::StatusOr<std::unique_ptr<VocabParallelHead>> VocabParallelHead::Create(
    int64_t vocab_rows, int64_t channels, InitSpec init, TpComm tp) {
  WEFT_RETURN_IF_ERROR(CheckVocab(vocab_rows, tp.size()));
  std::unique_ptr<VocabParallelHead> m(new VocabParallelHead(tp));
  m->weight_ = m->RegisterParameter("weight", {vocab_rows, channels}, init, true);
  WEFT_RETURN_IF_ERROR(ShardRows(m->weight_, tp));
  return m;
}

VocabParallelHead::VocabParallelHead(Parameter* table, TpComm tp)
    : Module("VocabParallelHead"), tp_(std::move(tp)), weight_(table), tied_(true) {
  table->MarkShared();
}

absl::StatusOr<Tensor> VocabParallelHead::Forward(RunContext& ctx, const Tensor& h) {
  const int64_t c = weight_->shape()[1], vl = weight_->shape()[0];
  WEFT_ASSIGN_OR_RETURN(Tensor whole, EnterColumnRegion(tp_, ctx, h));
  Tensor h2 = whole.View({whole.numel() / c, c});
  WEFT_ASSIGN_OR_RETURN(Tensor logits, ctx.Empty({h2.dim(0), vl}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(
      ctx.kernel(), {.out = logits, .a = h2, .b = weight_->value, .trans_b = true}));
  if (ctx.training) {
    SavedActivations& saved = ctx.Saved(this);
    saved[0] = h2;
    saved.shape = whole.shape();
  }
  return logits;
}

absl::StatusOr<Tensor> VocabParallelHead::Backward(RunContext& ctx, const Tensor& dlogits) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("vocab-parallel head backward without saved input",
                              "ForwardLoss in training mode before BackwardFromLoss");
  }
  WEFT_RETURN_IF_ERROR(
      WeightGradsNowOrAtW(ctx, dlogits, Tensor(), (*saved)[0], weight_, nullptr, Shape{}));
  WEFT_ASSIGN_OR_RETURN(Tensor dh, ctx.Empty((*saved)[0].shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(
      ctx.ops->Gemm(ctx.kernel(), {.out = dh, .a = dlogits, .b = weight_->value}));
  const Shape whole_shape = saved->shape;
  ctx.DropSaved(this);
  return EnterColumnRegionBackward(tp_, ctx, dh.View(whole_shape));
}

VocabParallelCrossEntropy::VocabParallelCrossEntropy(int64_t vocab, int64_t padded_vocab,
                                                     TpComm tp)
    : LossModule("VocabParallelCrossEntropy"),
      vocab_(vocab),
      local_columns_(VocabRowsPerRank(padded_vocab, tp.size())),
      tp_(std::move(tp)) {}

absl::StatusOr<Tensor> VocabParallelCrossEntropy::ComputeLoss(RunContext& ctx,
                                                              const Tensor& logits,
                                                              const Tensor& targets,
                                                              float dloss_scale) {
  if (logits.ndim() != 2 || logits.dim(0) != targets.numel() || logits.dim(1) != local_columns_) {
    return InvalidArgument(
        absl::StrCat("logits ", ShapeString(logits.shape()), " with targets ",
                     ShapeString(targets.shape())),
        absl::StrCat("this rank's logits (N, ", local_columns_, ") and N targets"));
  }
  const int64_t n = targets.numel();
  const int64_t begin = tp_.rank() * local_columns_;
  const Tensor y = targets.View({n});
  // Rows: [local max, global max]; [sum of exp, target logit] are summed
  // together in one all-reduce.
  WEFT_ASSIGN_OR_RETURN(Tensor maxes, ctx.Empty({2, n}, DType::kF32));
  WEFT_ASSIGN_OR_RETURN(Tensor sums, ctx.Empty({2, n}, DType::kF32));
  Tensor local_max = maxes.Select(0, 0), global_max = maxes.Select(0, 1);
  Tensor sum_exp = sums.Select(0, 0), target_logit = sums.Select(0, 1);
  WEFT_RETURN_IF_ERROR(ctx.ops->VocabCrossEntropyStats(ctx.kernel(), local_max, sum_exp,
                                                       target_logit, logits, y, begin, vocab_));
  WEFT_RETURN_IF_ERROR(global_max.CopyFrom(local_max, ctx.stream));
  WEFT_RETURN_IF_ERROR(Annotate(
      tp_.group->AllReduce(global_max, {.op = comm::ReduceOp::kMax, .stream = tp_.stream})
          ->Wait(),
      "tp cross-entropy max"));
  WEFT_RETURN_IF_ERROR(
      ctx.ops->VocabCrossEntropyRescale(ctx.kernel(), sum_exp, local_max, global_max));
  WEFT_RETURN_IF_ERROR(AllReduce(tp_, sums).status());
  WEFT_ASSIGN_OR_RETURN(Tensor losses, ctx.Empty({n}, DType::kF32));
  Tensor grad_in_place = logits;  // shares the logits' storage
  WEFT_RETURN_IF_ERROR(ctx.ops->VocabCrossEntropyFinish(
      ctx.kernel(), losses, grad_in_place, y, begin, vocab_, global_max, sum_exp, target_logit,
      dloss_scale, ctx.training));
  if (ctx.training) SaveGradient(ctx, logits);  // now dL/dlogits of this rank's columns
  return losses;
}

}  // namespace weft::tp
