// Trainer::Evaluate: the validation loss over the first N samples of the
// split, the same for any layout (trainer.h).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/trainer.h"

namespace weft {

int64_t Trainer::EvalSamples() const {
  const TrainConfig& c = cfg();
  if (c.eval_samples() > 0) return c.eval_samples();
  if (resumed_eval_samples_ > 0) return resumed_eval_samples_;
  return c.eval_batches() * c.micro_batch();
}

namespace {

// Rows of this rank's validation batch `index` (`rows` long) that fall among
// the first `samples` of the one-process order: the sampler gives rank r of
// w the samples r, r + w, r + 2w, ... in batches of `batch_size`, so they
// are a prefix of the batch.
int64_t EvaluatedRows(int64_t samples, int64_t index, int64_t rows, int64_t batch_size, int rank,
                      int world) {
  const int64_t mine = samples > rank ? (samples - rank + world - 1) / world : 0;
  return std::clamp<int64_t>(mine - index * batch_size, 0, rows);
}

// `targets` with rows [keep, rows) ignored (-1: no loss, no gradient).
absl::StatusOr<Tensor> IgnoreRowsFrom(const Tensor& targets, int64_t keep, NativeStream stream) {
  WEFT_ASSIGN_OR_RETURN(Tensor out, targets.Clone(stream));
  Tensor tail = out.Slice(0, keep, out.shape()[0]);
  absl::StatusOr<Tensor> ignored;
  switch (targets.dtype()) {
    case DType::kI32:
      ignored = Tensor::FromVector<int32_t>(std::vector<int32_t>(tail.numel(), -1), tail.shape());
      break;
    case DType::kI64:
      ignored = Tensor::FromVector<int64_t>(std::vector<int64_t>(tail.numel(), -1), tail.shape());
      break;
    default:
      return InvalidArgument(absl::StrCat("validation targets of dtype ", DTypeName(targets.dtype())),
                             "i32 or i64 class indices (a partly evaluated batch ignores rows)",
                             "set eval_samples to a multiple of micro_batch x data-parallel ranks");
  }
  WEFT_RETURN_IF_ERROR(ignored.status());
  WEFT_RETURN_IF_ERROR(tail.CopyFrom(*ignored, stream));
  return out;
}

}  // namespace

absl::StatusOr<double> Trainer::Evaluate(int64_t samples) {
  if (loaders_.val == nullptr) {
    return FailedPrecondition("no validation data", "a validation split",
                              "set --val_fraction > 0 or provide val shards");
  }
  if (samples < 1) {
    return InvalidArgument(absl::StrCat("an evaluation over ", samples, " samples"),
                           "at least 1 (a mean over no samples is undefined)");
  }
  data::DataLoader& val = *loaders_.val;
  samples = std::min(samples, val.dataset().num_samples());
  // Every evaluation sees the same samples: a curve's points (and a resumed
  // run's) compare the weights, not the data.
  WEFT_RETURN_IF_ERROR(val.Restore(val_start_));
  const int world = val.options().world_size;
  const int rank = val.options().rank;
  const int64_t batch_size = val.options().batch_size;
  // Every data-parallel rank runs as many forwards (collectives inside them
  // must match); rows past `samples` are ignored, not left out, so the
  // shapes stay those of training.
  const int64_t forwards = (samples + world * batch_size - 1) / (world * batch_size);
  ctx_.training = false;
  WEFT_ASSIGN_OR_RETURN(Tensor sum, ctx_.Zeros({1}, DType::kF32));
  double targets_per_sample = 0;
  absl::Status status;
  for (int64_t i = 0; i < forwards && status.ok(); ++i) {
    absl::StatusOr<data::Batch> batch = val.Next();
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    status = batch->WaitOn(compute_stream());
    if (!status.ok()) break;
    const Tensor& y = batch->Get(options_.job->TargetField());
    const int64_t rows = y.shape()[0];
    const int64_t keep = EvaluatedRows(samples, i, rows, batch_size, rank, world);
    absl::StatusOr<Tensor> masked =
        keep == rows ? absl::StatusOr<Tensor>(y) : IgnoreRowsFrom(y, keep, ctx_.stream);
    if (!masked.ok()) {
      status = masked.status();
      break;
    }
    absl::StatusOr<Tensor> losses =
        model_->ForwardLoss(ctx_, batch->Get(options_.job->InputField()), *masked, 1.0f);
    status = losses.ok() ? ctx_.ops->Sum(ctx_.kernel(), sum, *losses, true) : losses.status();
    targets_per_sample = static_cast<double>(y.numel() / rows);
  }
  ctx_.training = true;
  WEFT_RETURN_IF_ERROR(status);
  WEFT_RETURN_IF_ERROR(parallel_->SumLoss(sum, ctx_.stream));
  WEFT_ASSIGN_OR_RETURN(std::vector<float> host, sum.ToFloats());
  // The ranks together evaluated each of the first `samples` once.
  return host[0] / (targets_per_sample * static_cast<double>(samples));
}

}  // namespace weft
