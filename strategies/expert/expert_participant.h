// ExpertParticipant: expert parallelism's part of the step: sums expert
// gradients over the ranks of dp_shard that hold the same experts (other ep
// blocks), and completes the gradient norm with the other ep ranks' experts.
//
// The norm is rebuilt as dense + all-reduce over ep (my experts) rather
// than patched (local - mine + all): every rank of the ep group must get
// bitwise the same norm, or the clipping scale, and then the replicated
// dense weights, drift apart in the last bits. Both parts are complete over
// tp first (GradNormSquared with the tp group): under ep x tp an expert's
// hidden units are split over tp, its output bias is not. When a later
// participant sums the whole norm over dp_shard (fsdp:
// ParallelState::grad_norm_sums_dp_shard) there is no all-reduce over ep:
// each rank hands in its dense shards plus its experts divided by the ranks of
// dp_shard holding them, so that sum, and a pipeline's over its stages,
// count every element once.
#ifndef WEFT_STRATEGIES_EXPERT_EXPERT_PARTICIPANT_H_
#define WEFT_STRATEGIES_EXPERT_EXPERT_PARTICIPANT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/process_group/comm_stats.h"
#include "comm/process_group/process_group.h"
#include "core/kernels/kernel_ops.h"
#include "core/nn/parameter.h"
#include "core/parallel/parallel_state.h"
#include "core/parallel/step_participant.h"
#include "strategies/expert/all_to_all_dispatcher.h"

namespace weft {

class ExpertParticipant : public StepParticipant {
 public:
  // `replicas` (null or size 1: none) holds this rank's experts elsewhere in
  // dp_shard; `ep_group` holds the other experts. `state` (the job's, which
  // owns the participant) says at step time how the norm is completed.
  ExpertParticipant(std::vector<Parameter*> expert_params,
                    std::vector<std::shared_ptr<AllToAllDispatcher>> dispatchers,
                    std::shared_ptr<comm::ProcessGroup> ep_group,
                    std::shared_ptr<comm::ProcessGroup> replicas,
                    std::shared_ptr<comm::ProcessGroup> model_parallel,
                    const ParallelState* state, KernelOps* ops, KernelContext kernel)
      : params_(std::move(expert_params)),
        dispatchers_(std::move(dispatchers)),
        ep_group_(std::move(ep_group)),
        replicas_(std::move(replicas)),
        model_parallel_(std::move(model_parallel)),
        state_(state),
        ops_(ops),
        kernel_(kernel) {}

  absl::Status AfterAllGradients(const std::vector<OptimTarget>& targets) override;
  absl::Status ReduceGradNormSq(Tensor& norm_sq) override;
  // Since the last call: ep_a2a_payload_mb, this rank's all_to_all_v
  // payload as the process group counted it (rows sent, its own block
  // included; dispatch and combine, forward and backward); ep_a2a_bus_mb,
  // what actually left the rank; ep_a2a_own_mb and ep_a2a_expert_mb, the
  // dispatchers' split of the payload into rows of this rank's tokens and
  // rows its experts computed (see AllToAllDispatcher); ep_a2a_wait_ms,
  // the host time waiting for the exchanges the experts overlap.
  void AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) override;

 private:
  std::vector<Parameter*> params_;
  std::vector<std::shared_ptr<AllToAllDispatcher>> dispatchers_;
  int64_t last_own_ = 0, last_expert_ = 0;
  double last_wait_ms_ = 0;
  std::shared_ptr<comm::ProcessGroup> ep_group_;
  std::shared_ptr<comm::ProcessGroup> replicas_;
  std::shared_ptr<comm::ProcessGroup> model_parallel_;  // tp (null: none)
  const ParallelState* state_;
  KernelOps* ops_;
  KernelContext kernel_;
  std::vector<OptimTarget> dense_, experts_;  // this step's targets
  comm::OpCounters last_;  // ep group all_to_all_v counters at the last report
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_EXPERT_EXPERT_PARTICIPANT_H_
