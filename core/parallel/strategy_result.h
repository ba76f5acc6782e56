// StrategyResult: what one strategy hands back when it is applied.
//
// Strategies do not write into a shared state: each returns what it made,
// and the composer (composer.h) folds the results, in application order,
// into the job's ParallelState, which the trainer and later strategies read.
#ifndef WEFT_CORE_PARALLEL_STRATEGY_RESULT_H_
#define WEFT_CORE_PARALLEL_STRATEGY_RESULT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group/process_group.h"
#include "core/nn/stage.h"
#include "core/parallel/step_participant.h"
#include "core/parallel/step_schedule.h"

namespace weft {

// How a strategy changes the tensors between the model's stages from what
// Model::StageInput states (sp keeps the residual stream on sequence
// shards). The composer chains them in application order.
using StageBoundaryFn = std::function<absl::StatusOr<StageTensor>(const StageTensor&)>;

struct StrategyResult {
  // Its part in the training step, called in composition order (may be empty).
  std::vector<std::unique_ptr<StepParticipant>> participants;
  // Lines for the startup log: what it changed that the user should know.
  std::vector<std::string> notes;
  // The step's order of forwards and backwards when it owns it (a pipeline).
  std::shared_ptr<const StepSchedule> step_schedule;
  StageBoundaryFn stage_boundary;  // null: boundaries unchanged
  // A group whose ranks each hold part of the step's loss (cp's chunks, pp's
  // last stage): the logged loss is also summed over it.
  std::shared_ptr<comm::ProcessGroup> loss_group;
  // Ranks beyond the data-parallel replicas that hold identical copies of
  // what the optimizer updates (cp's group): `copies` of them, this rank
  // being copy `copy`. Checkpoints write copy 0 of every piece.
  int replica_copies = 1;
  int replica_copy = 0;
  // Its participant's ReduceGradNormSq sums the whole squared norm over
  // dp_shard (fsdp, zero-3): earlier participants then hand it this rank's
  // share instead of a total over dp_shard.
  bool grad_norm_sums_dp_shard = false;
  // Communication objects the job must keep alive (process groups).
  std::vector<std::shared_ptr<void>> keep_alive;
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_STRATEGY_RESULT_H_
