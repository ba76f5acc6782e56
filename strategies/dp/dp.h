// dp: single-process DataParallel, after torch.nn.DataParallel, the slow
// baseline that ddp beats.
//
// The original model stays the master (replica 0, on the job's device);
// --dp_devices - 1 more replicas are built from its architecture on
// devices 1.. (CUDA GPUs, or CPU "devices": threads). Every forward:
//   replicate  copy the master's parameters into every replica
//   scatter    split the micro-batch along dim 0 (ceil-sized chunks)
//   parallel   run each replica's forward (and later backward) in a thread
//   gather     concatenate the per-target losses on the master device
// After backward, every replica's gradients are added into the master's,
// so the optimizer sees the gradient of the whole micro-batch. The job has
// one process (world size 1).
#ifndef WEFT_STRATEGIES_DP_DP_H_
#define WEFT_STRATEGIES_DP_DP_H_

#include <memory>

#include "core/parallel/strategy.h"

namespace weft {

class DpStrategy : public Strategy {
 public:
  static std::unique_ptr<Strategy> Create() { return std::make_unique<DpStrategy>(); }

  std::string Name() const override { return "dp"; }
  StrategyPhase Phase() const override { return StrategyPhase::kDataParallel; }
  std::vector<std::string> RequiredAxes() const override { return {}; }
  OptionSchema Options() const override;
  bool KeepsParametersWhole(const StrategyOptionSet&) const override { return true; }
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_DP_DP_H_
