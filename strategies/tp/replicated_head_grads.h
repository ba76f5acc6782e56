// K/V heads fewer than tp ranks (grouped-query attention with n_kv_head <
// tp): each K/V head's projection block is held by the tp / n_kv_head
// consecutive tp ranks whose query heads it serves (Megatron's rule). Each
// of them computes the gradient its own query heads give the block, so the
// block's gradient is the sum over those ranks. The sum runs once per step,
// after every data-parallel reduction (the holders share their data-parallel
// coordinates, so their optimizer targets of a block cover the same
// elements), before the gradient norm.
#ifndef WEFT_STRATEGIES_TP_REPLICATED_HEAD_GRADS_H_
#define WEFT_STRATEGIES_TP_REPLICATED_HEAD_GRADS_H_

#include <memory>
#include <vector>

#include "comm/process_group/process_group.h"
#include "core/nn/parameter.h"
#include "core/parallel/step_participant.h"

namespace weft::tp {

class ReplicatedHeadGrads : public StepParticipant {
 public:
  // `holders`: the ranks holding this rank's copy of `params`.
  ReplicatedHeadGrads(std::vector<Parameter*> params,
                      std::shared_ptr<comm::ProcessGroup> holders, NativeStream stream)
      : params_(std::move(params)), holders_(std::move(holders)), stream_(stream) {}

  absl::Status AfterAllGradients(const std::vector<OptimTarget>& targets) override;

 private:
  const std::vector<Parameter*> params_;
  const std::shared_ptr<comm::ProcessGroup> holders_;
  const NativeStream stream_;
};

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_REPLICATED_HEAD_GRADS_H_
