#include "strategies/tp/sequence_gathered.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/tp/region_ops.h"

namespace weft::tp {
namespace {

constexpr int kSequenceDim = 1;  // of (B, T, C)

}  // namespace

absl::StatusOr<Tensor> SequenceGathered::OwnBlock(RunContext& ctx, const Tensor& full) const {
  const int64_t t = full.dim(kSequenceDim), block = t / tp_.size();
  if (block * tp_.size() != t) {
    return Internal(absl::StrCat("'", name(), "': a gathered sequence of ", t,
                                 " tokens split over tp=", tp_.size()));
  }
  return full.Slice(kSequenceDim, tp_.rank() * block, (tp_.rank() + 1) * block)
      .Contiguous(ctx.stream);
}

absl::StatusOr<Tensor> SequenceGathered::Forward(RunContext& ctx, const Tensor& x) {
  if (x.ndim() < 2) {
    return InvalidArgument(absl::StrCat("'", name(), "' input ", ShapeString(x.shape())),
                           "(B, T/tp, ...) sequence blocks");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor whole, AllGatherAlong(tp_, ctx, x, kSequenceDim));
  WEFT_ASSIGN_OR_RETURN(Tensor y, inner()->CallForward(ctx, whole));
  return OwnBlock(ctx, y);
}

absl::StatusOr<Tensor> SequenceGathered::Backward(RunContext& ctx, const Tensor& dy) {
  WEFT_ASSIGN_OR_RETURN(Tensor whole, AllGatherAlong(tp_, ctx, dy, kSequenceDim));
  WEFT_ASSIGN_OR_RETURN(Tensor dx, inner()->CallBackward(ctx, whole));
  return OwnBlock(ctx, dx);
}

absl::Status SequenceGathered::Wrap(Module& parent, const std::string& child, const TpComm& tp) {
  std::unique_ptr<SequenceGathered> wrapper(new SequenceGathered(tp));
  SequenceGathered* raw = wrapper.get();
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Module> inner,
                        parent.ReplaceChild(child, std::move(wrapper)));
  // As in the recompute wrapper: the inner module keeps its names, under
  // the wrapper with an empty local name; swappable, so a recompute policy
  // naming its type can still wrap it.
  raw->RegisterSwappableModule("", std::move(inner));
  return absl::OkStatus();
}

}  // namespace weft::tp
