#include "strategies/cp/cp_model.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/cp/zigzag.h"

namespace weft::cp {

ContextParallelModel::ContextParallelModel(std::unique_ptr<Model> inner, int cp_rank, int cp_size)
    : WrappedModel("ContextParallel", std::move(inner)), rank_(cp_rank), size_(cp_size) {}

absl::StatusOr<StageBatch> ContextParallelModel::LocalBatch(const RunContext& ctx,
                                                            const Tensor& inputs,
                                                            const Tensor& targets) const {
  if (inputs.ndim() != 2 || inputs.shape() != targets.shape()) {
    return InvalidArgument(
        "inputs " + ShapeString(inputs.shape()) + " and targets " + ShapeString(targets.shape()),
        "equal shapes (B, T)");
  }
  WEFT_ASSIGN_OR_RETURN(TokenChunks chunks, ZigzagChunks(rank_, size_, inputs.dim(1)));
  StageBatch local;
  local.sequence = chunks;
  WEFT_ASSIGN_OR_RETURN(local.inputs, TakeChunks(ctx, inputs, chunks));
  WEFT_ASSIGN_OR_RETURN(local.targets, TakeChunks(ctx, targets, chunks));
  return local;
}

absl::StatusOr<Tensor> ContextParallelModel::ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                                         const Tensor& targets, float dloss_scale) {
  WEFT_ASSIGN_OR_RETURN(StageBatch local, LocalBatch(ctx, inputs, targets));
  chunks_ = local.sequence;
  SequenceScope scope(ctx, local.sequence);
  Tensor losses;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/false, [&]() -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(losses,
                          inner().ForwardLoss(ctx, local.inputs, local.targets, dloss_scale));
    return absl::OkStatus();
  }));
  return losses;
}

absl::Status ContextParallelModel::BackwardFromLoss(RunContext& ctx) {
  if (!chunks_.has_value()) {
    return FailedPrecondition("context-parallel backward before any forward",
                              "ForwardLoss in training mode first");
  }
  SequenceScope scope(ctx, *chunks_);
  return RunHooked(ctx, /*backward=*/true, [&] { return inner().BackwardFromLoss(ctx); });
}

absl::StatusOr<Tensor> ContextParallelModel::Forward(RunContext&, const Tensor&) {
  return absl::UnimplementedError(
      "a context-parallel model holds chunks of each sequence on different ranks, so it "
      "offers no whole-sequence predictions; expected ForwardLoss. Hint: run inference "
      "without --cp");
}

absl::StatusOr<Tensor> ContextParallelModel::Backward(RunContext&, const Tensor&) {
  return absl::UnimplementedError(
      "a context-parallel model has no prediction backward; expected BackwardFromLoss");
}

std::string ContextParallelModel::Summary() const {
  return absl::StrCat(inner().Summary(), " | cp ", size_, " (zigzag, ring attention)");
}

}  // namespace weft::cp
