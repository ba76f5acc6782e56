// zero: ZeRO data parallelism (Rajbhandari et al., 2020) at stage 1, 2 or 3,
// chosen by --zero_stage and never silently changed.
//
// Parameters are packed into flat groups sharded over all data-parallel
// ranks (rank r owns the r-th contiguous slice of each group):
//   stage 1  optimizer state sharded. Gradients accumulate in full buffers
//            and are reduce-scattered once per step; each rank updates its
//            slice, then the parameters are all-gathered.
//   stage 2  + gradients sharded. A group's full gradient buffer exists only
//            from its first backward write until its reduce-scatter, which
//            starts as soon as its layers finish backward (overlapping the
//            rest), every micro-batch; ranks keep only their slice.
//   stage 3  + parameters sharded: fsdp's unit schedule (strategies/fsdp/
//            fsdp.h) over the whole data-parallel group. Each unit (a module
//            whose type is in --zero3_wrap, default TransformerBlock|Linear)
//            is all-gathered before its forward, the next unit prefetched,
//            freed after, and gathered again for its backward; the root's
//            other parameters (embeddings, tied head, final norm) stay
//            gathered from the start of forward to the end of backward.
// Groups: stages 1-2 bucket parameters in backward order (--bucket_mb);
// stage 3 has one group per unit, so memory follows the largest unit (two
// while one is prefetched). A unit is gathered whole because one module's
// backward may write another's gradient (the MLP's fused GELU backward
// writes fc's bias gradient inside proj's): with one group per Linear that
// fusion could not run, and bf16 results then differed from one process.
// Per-rank model state (fp32, Adam): 16Ψ for none, 8Ψ + 8Ψ/N (stage 1),
// 4Ψ + 12Ψ/N (stage 2), 16Ψ/N (stage 3), plus transient gathered layers.
#ifndef WEFT_STRATEGIES_ZERO_ZERO_H_
#define WEFT_STRATEGIES_ZERO_ZERO_H_

#include <memory>

#include "core/parallel/strategy.h"

namespace weft {

class ZeroStrategy : public Strategy {
 public:
  static std::unique_ptr<Strategy> Create() { return std::make_unique<ZeroStrategy>(); }

  std::string Name() const override { return "zero"; }
  StrategyPhase Phase() const override { return StrategyPhase::kDataParallel; }
  std::vector<std::string> RequiredAxes() const override { return {"dp_replicate", "dp_shard"}; }
  OptionSchema Options() const override;
  // Stages 1 and 2 shard optimizer state and gradients, not parameters.
  bool KeepsParametersWhole(const StrategyOptionSet& options) const override {
    return options.GetInt("zero_stage") <= 2;
  }
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_ZERO_ZERO_H_
