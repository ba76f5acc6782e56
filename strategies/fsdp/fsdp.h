// fsdp: fully sharded data parallel, after PyTorch FSDP.
//
// Units: every module whose type is in the wrap policy (default
// TransformerBlock; --strategy_options=fsdp_wrap=A|B to change it) is one
// unit, and the root's remaining parameters (embeddings, final norm, a tied
// head) form the root unit. Each unit's parameters are one flat parameter,
// sharded over the dp_shard axis.
//
// Schedule per unit:
//   pre-forward   all-gather (or wait for the prefetch), then prefetch the
//                 next unit's all-gather (within the running pipeline chunk)
//   post-forward  free the gathered parameters (reshard_after_forward=true)
//                 or keep them for backward (false: less communication,
//                 more memory)
//   pre-backward  all-gather again if resharded, allocate the full gradient,
//                 prefetch the previous unit (within the chunk)
//   post-backward reduce-scatter the gradient into this rank's shard
//                 (asynchronously, at most two in flight) and free both
// The root unit stays gathered from the root's forward to its backward.
//
// HSDP: on a 2-D mesh [dp_replicate, dp_shard] parameters are sharded over
// dp_shard and replicated over dp_replicate; shard gradients are
// all-reduced over dp_replicate once per step.
// Mixed precision: parameters are gathered in the compute dtype (bf16 on
// CUDA; the fp32 master lives with the optimizer's shard) and gradients are
// reduced in --reduce_dtype.
#ifndef WEFT_STRATEGIES_FSDP_FSDP_H_
#define WEFT_STRATEGIES_FSDP_FSDP_H_

#include <memory>

#include "core/parallel/strategy.h"

namespace weft {

class FsdpStrategy : public Strategy {
 public:
  static std::unique_ptr<Strategy> Create() { return std::make_unique<FsdpStrategy>(); }

  std::string Name() const override { return "fsdp"; }
  StrategyPhase Phase() const override { return StrategyPhase::kDataParallel; }
  std::vector<std::string> RequiredAxes() const override { return {"dp_replicate", "dp_shard"}; }
  OptionSchema Options() const override;
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;
  std::string HintBesideDataParallel() const override {
    return "fsdp with dp_replicate > 1 already gives hybrid sharding (HSDP)";
  }
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_FSDP_FSDP_H_
