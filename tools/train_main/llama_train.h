// RunLlamaTraining: one Llama training job from its config, as
// //models/llama:train runs it.
#ifndef WEFT_TOOLS_TRAIN_MAIN_LLAMA_TRAIN_H_
#define WEFT_TOOLS_TRAIN_MAIN_LLAMA_TRAIN_H_

#include "absl/status/status.h"
#include "models/llama/llama_config.pb.h"

namespace weft {

absl::Status RunLlamaTraining(const LlamaJob& job);

}  // namespace weft

#endif  // WEFT_TOOLS_TRAIN_MAIN_LLAMA_TRAIN_H_
