// ddp: distributed data parallel, after PyTorch's DistributedDataParallel.
//
// - At Apply, parameters are broadcast from data-parallel rank 0.
// - Gradients live in flat buckets (about --bucket_mb each), filled in
//   reverse parameter order, which is the order backward produces them.
//   Every parameter's grad is a view into its bucket: no copies.
// - A post-backward hook on each module marks its parameters ready; when
//   every parameter of a bucket is ready, the bucket's all-reduce (sum:
//   the loss is already scaled by 1 / global batch) starts asynchronously,
//   so communication overlaps the rest of the backward pass.
// - no_sync: with gradient accumulation only the last micro-batch of a step
//   communicates; earlier ones accumulate locally.
// - FinishGradients launches buckets that never became ready (unused
//   parameters) and waits for all of them.
// With --overlap=false every bucket launches only in FinishGradients, the
// baseline that shows how much communication the overlap hides.
#ifndef WEFT_STRATEGIES_DDP_DDP_H_
#define WEFT_STRATEGIES_DDP_DDP_H_

#include <memory>

#include "core/parallel/strategy.h"

namespace weft {

class DdpStrategy : public Strategy {
 public:
  static std::unique_ptr<Strategy> Create() { return std::make_unique<DdpStrategy>(); }

  std::string Name() const override { return "ddp"; }
  StrategyPhase Phase() const override { return StrategyPhase::kDataParallel; }
  std::vector<std::string> RequiredAxes() const override { return {"dp_replicate", "dp_shard"}; }
  OptionSchema Options() const override;
  bool KeepsParametersWhole(const StrategyOptionSet&) const override { return true; }
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_DDP_DDP_H_
