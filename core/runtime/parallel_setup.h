// Parallel setup in two phases, because the data (and so the model's vocab)
// depends on the data-parallel rank, and strategies need the model:
//   InitParallel    reads the launcher's environment, creates the process
//                   groups and the device mesh: ranks and sizes are known.
//   ApplyStrategies applies the requested strategies to the materialized
//                   model and records their step participants.
#ifndef WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_
#define WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/nn/model.h"
#include "core/parallel/parallel_state.h"
#include "core/runtime/train_config.pb.h"

namespace weft {

absl::StatusOr<std::unique_ptr<ParallelState>> InitParallel(const TrainConfig& config,
                                                            Device device);

absl::Status ApplyStrategies(const TrainConfig& config, Model& model, RunContext& ctx,
                             Allocator* state_allocator, ParallelState& state);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_PARALLEL_SETUP_H_
