// Text from the model being trained (--sample_every=N): rank 0 prints the
// prompt and its continuation every N steps and after the last one, drawn
// as //models/gpt:sample draws them from that step's checkpoint (the same
// tokens for the same prompt, temperature and seed), with the key/value
// cache. A look at what the model has learned, not an evaluation.
#ifndef WEFT_MODELS_GPT_TRAIN_SAMPLER_H_
#define WEFT_MODELS_GPT_TRAIN_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/runtime/trainer.h"
#include "data/tokenizer.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft {

class TrainSampler {
 public:
  // Before training: sampling needs the whole model on rank 0 (no
  // strategy, dp, ddp, or zero stages 1-2) and a tokenizer; an error says what
  // to do else. The tokenizer is parsed and the prompt encoded here, once.
  static absl::StatusOr<std::unique_ptr<TrainSampler>> Create(const GptJob& job,
                                                              Trainer& trainer);

  // After step `step` (TrainJob::AfterStep): samples when it is due
  // (a multiple of sample_every, or the last step) on rank 0; nothing
  // elsewhere.
  absl::Status AtStep(Trainer& trainer, int64_t step);

 private:
  TrainSampler(const GptJob& job, std::unique_ptr<data::Tokenizer> tokenizer,
               std::vector<int32_t> prompt)
      : job_(job), tokenizer_(std::move(tokenizer)), prompt_(std::move(prompt)) {}

  GptJob job_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  std::vector<int32_t> prompt_;
};

}  // namespace weft

#endif  // WEFT_MODELS_GPT_TRAIN_SAMPLER_H_
