// recompute: activation recomputation as a strategy. The modules a policy
// picks are wrapped in a Recompute (core/nn/recompute.h): the forward keeps
// only their input, and they run forward again just before their backward.
//   recompute_policy=full       every TransformerBlock (the default)
//   recompute_policy=attention  every attention layer (selective: the
//                               attention's activations are the large ones)
//   recompute_policy=modules    the types in recompute_modules=A|B
//
// It runs in the recompute phase, after tp/pp have reshaped the model and
// before the data-parallel strategies hook it, so fsdp sees the wrapped
// modules and re-gathers their parameters for the second forward.
// --recompute is shorthand for adding it to --strategy.
#ifndef WEFT_STRATEGIES_RECOMPUTE_RECOMPUTE_H_
#define WEFT_STRATEGIES_RECOMPUTE_RECOMPUTE_H_

#include <memory>

#include "core/parallel/parallel_plan.h"
#include "core/parallel/strategy.h"

namespace weft {

class RecomputeStrategy : public Strategy {
 public:
  static std::unique_ptr<Strategy> Create() { return std::make_unique<RecomputeStrategy>(); }

  std::string Name() const override { return "recompute"; }
  StrategyPhase Phase() const override { return StrategyPhase::kRecompute; }
  std::vector<std::string> RequiredAxes() const override { return {}; }
  // --recompute is shorthand for naming it.
  bool JoinsUnnamed(const PlanView& plan) const override { return plan.Switch("recompute"); }
  OptionSchema Options() const override;
  bool KeepsParametersWhole(const StrategyOptionSet&) const override { return true; }
  // Its forward reruns inside the captured step.
  bool CapturableInStepGraph() const override { return true; }
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_RECOMPUTE_RECOMPUTE_H_
