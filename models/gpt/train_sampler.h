// Text from the model being trained (--sample_every=N): rank 0 prints the
// prompt and its continuation every N steps and after the last one, drawn
// as //models/gpt:sample draws them from that step's checkpoint (the same
// tokens for the same prompt, temperature and seed), with the key/value
// cache. A look at what the model has learned, not an evaluation.
#ifndef WEFT_MODELS_GPT_TRAIN_SAMPLER_H_
#define WEFT_MODELS_GPT_TRAIN_SAMPLER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/runtime/trainer.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft {

// Before training: sampling needs the whole model on rank 0 (no strategy,
// ddp, or zero stages 1-2) and a tokenizer; an error says what to do else.
absl::Status CheckTrainSampling(const GptJob& job, Trainer& trainer);

// After step `step`: samples when it is due (a multiple of sample_every,
// or the last step) on rank 0; nothing elsewhere.
absl::Status SampleAtStep(const GptJob& job, Trainer& trainer, int64_t step);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_TRAIN_SAMPLER_H_
