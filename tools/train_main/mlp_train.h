// RunMlpTraining: one MLP classifier job from its config, as
// //models/mlp:train runs it (Fashion-MNIST data, test accuracy at the end).
#ifndef WEFT_TOOLS_TRAIN_MAIN_MLP_TRAIN_H_
#define WEFT_TOOLS_TRAIN_MAIN_MLP_TRAIN_H_

#include "absl/status/status.h"
#include "models/mlp/mlp_config.pb.h"

namespace weft {

absl::Status RunMlpTraining(const MlpJob& job);

}  // namespace weft

#endif  // WEFT_TOOLS_TRAIN_MAIN_MLP_TRAIN_H_
