// Classifier evaluation: accuracy and mean loss over one full pass of the
// trainer's validation (test) loader, summed over data-parallel ranks.
#ifndef WEFT_MODELS_MLP_CLASSIFIER_EVALUATION_H_
#define WEFT_MODELS_MLP_CLASSIFIER_EVALUATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/runtime/trainer.h"

namespace weft {

struct ClassificationResult {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy = 0;
};

// Runs the model's forward (no dropout) on every test sample of this rank's
// shard, from the start of an epoch, and compares argmax(logits) with the
// label.
absl::StatusOr<ClassificationResult> EvaluateClassifier(Trainer& trainer);

}  // namespace weft

#endif  // WEFT_MODELS_MLP_CLASSIFIER_EVALUATION_H_
