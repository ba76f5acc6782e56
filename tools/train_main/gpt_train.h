// RunGptTraining: one GPT training job from its config, as //models/gpt:train
// runs it (the policy around the trainer: --strategy=auto, --init_from,
// --sample_every, resume notes, the run report).
#ifndef WEFT_TOOLS_TRAIN_MAIN_GPT_TRAIN_H_
#define WEFT_TOOLS_TRAIN_MAIN_GPT_TRAIN_H_

#include "absl/status/status.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft {

absl::Status RunGptTraining(const GptJob& job);

}  // namespace weft

#endif  // WEFT_TOOLS_TRAIN_MAIN_GPT_TRAIN_H_
