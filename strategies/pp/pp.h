// pp: pipeline parallelism as a strategy plugin.
//
// Splits Model::Stages() into pp x pp_virtual_stages contiguous chunks (by
// stage count or by parameter count, --pp_split), keeps on each rank only
// the parameters its chunks read (Parameter::held; others are freed), and
// replaces the root with a PipelineModel whose step schedule
// (--pp_schedule) runs the chunks' forwards and backwards with activations
// and gradients exchanged between neighbouring ranks.
//
// A weight read by chunks on different ranks (a tied embedding and head on
// the first and last rank) is held by each; the first holds the original,
// the others copies (Parameter::copy_index) whose gradients are summed with
// the original's after every step's backward, so all apply the same update.
// The loss is taken on the last rank and summed over the pp group for
// logging; gradient norms add up over the pp ranks.
//
// Composes with the data-parallel family (applied after it on each
// stage's parameters) and with tp and cp (applied before it): the stages it
// splits are the model's as those left it, and they run on the part of each
// micro-batch the model names (Model::LocalBatch: under cp this rank's
// sequence chunks). Depends only on comm/ and core/.
#ifndef WEFT_STRATEGIES_PP_PP_H_
#define WEFT_STRATEGIES_PP_PP_H_

#include <memory>

#include "core/parallel/parallel_plan.h"
#include "core/parallel/strategy.h"

namespace weft {

class PipelineStrategy : public Strategy {
 public:
  static std::unique_ptr<Strategy> Create() { return std::make_unique<PipelineStrategy>(); }

  std::string Name() const override { return "pp"; }
  StrategyPhase Phase() const override { return StrategyPhase::kPipeline; }
  std::vector<std::string> RequiredAxes() const override { return {"pp"}; }
  // The mesh has pipeline ranks (--pp > 1, or --pp=0 resolving to more).
  bool JoinsUnnamed(const PlanView& plan) const override { return plan.AxisSize("pp") > 1; }
  OptionSchema Options() const override;
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_PP_PP_H_
