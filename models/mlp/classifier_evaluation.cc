#include "models/mlp/classifier_evaluation.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<ClassificationResult> EvaluateClassifier(Trainer& trainer) {
  data::DataLoader* loader = trainer.val_loader();
  if (loader == nullptr) {
    return FailedPrecondition("no test data to evaluate", "a validation/test loader");
  }
  data::LoaderState start = loader->State();
  if (start.batch > 0) ++start.epoch;
  start.batch = 0;
  WEFT_RETURN_IF_ERROR(loader->Restore(start));
  RunContext& ctx = trainer.context();
  ctx.training = false;
  Model& model = trainer.model();
  int64_t correct = 0, total = 0;
  // The sampler pads the test order to a multiple of the ranks by wrapping
  // to its start; rank r of w holds samples r, r + w, ..., so its real ones
  // are a prefix of its share. The padding repeated images in the counts
  // (10002 of 10000 at 3 ranks).
  const int64_t n = loader->dataset().num_samples();
  const int rank = loader->options().rank, world = loader->options().world_size;
  const int64_t batch_size = loader->options().batch_size;
  const int64_t mine = n > rank ? (n - rank + world - 1) / world : 0;
  for (int64_t i = 0; i < loader->batches_per_epoch(); ++i) {
    WEFT_ASSIGN_OR_RETURN(data::Batch batch, loader->Next());
    WEFT_RETURN_IF_ERROR(batch.WaitOn(trainer.compute_stream()));
    const Tensor& x = batch.Get("image");
    WEFT_ASSIGN_OR_RETURN(Tensor logits, model.CallForward(ctx, x));
    WEFT_ASSIGN_OR_RETURN(std::vector<float> host, logits.ToFloats());
    WEFT_ASSIGN_OR_RETURN(std::vector<int32_t> labels, batch.Get("label").ToVector<int32_t>());
    const int64_t classes = logits.dim(-1);
    const int64_t keep = std::clamp<int64_t>(mine - i * batch_size, 0, labels.size());
    for (int64_t r = 0; r < keep; ++r) {
      int64_t best = 0;
      for (int64_t k = 1; k < classes; ++k) {
        if (host[r * classes + k] > host[r * classes + best]) best = k;
      }
      correct += best == labels[r];
      ++total;
    }
  }
  ctx.training = true;
  if (trainer.parallel().sums_loss()) {
    for (int64_t* v : {&correct, &total}) {
      WEFT_ASSIGN_OR_RETURN(Tensor t, ctx.Empty({1}, DType::kF32));
      WEFT_RETURN_IF_ERROR(t.CopyFrom(*Tensor::FromFloats({static_cast<float>(*v)}, {1})));
      WEFT_RETURN_IF_ERROR(trainer.parallel().SumLoss(t, ctx.stream));
      WEFT_ASSIGN_OR_RETURN(std::vector<float> back, t.ToFloats());
      *v = static_cast<int64_t>(back[0]);
    }
  }
  ClassificationResult r{correct, total, total > 0 ? double(correct) / double(total) : 0.0};
  return r;
}

}  // namespace weft
