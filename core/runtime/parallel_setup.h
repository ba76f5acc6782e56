// SetUpParallel: turns the parallel config into a ParallelState for this
// process: reads the launcher's environment, builds the device mesh and
// process groups, and applies the requested strategies to the model.
#ifndef WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_
#define WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/nn/model.h"
#include "core/runtime/parallel_state.h"
#include "core/runtime/train_config.pb.h"

namespace weft {

absl::StatusOr<std::unique_ptr<ParallelState>> SetUpParallel(const TrainConfig& config,
                                                             Model& model, RunContext& ctx,
                                                             Allocator* state_allocator);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_
