// The composer: the order strategies are applied in (ApplicationOrder),
// their validation, and applying them. It creates the named strategies,
// orders them, validates every one against the mesh before applying any,
// then applies them in that order and folds each one's StrategyResult into
// the job's ParallelState. Names may repeat only by mistake: a duplicate is an
// error, as is combining two strategies that both own the data-parallel
// gradient reduction (e.g. ddp and fsdp). Each strategy gets its own typed
// options (strategy_options.h). On a multi-rank mesh every RequiredAxes()
// axis must exist, and every axis of size > 1 must be used by some applied
// strategy ("--tp=2 with only ddp" is an error naming tp).
#ifndef WEFT_CORE_PARALLEL_COMPOSER_H_
#define WEFT_CORE_PARALLEL_COMPOSER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/parallel/parallel_plan.h"
#include "core/parallel/parallel_state.h"
#include "core/parallel/strategy.h"
#include "core/parallel/strategy_options.h"

namespace weft {

// The order strategies are applied in, as one rule: by phase
//   1. tensor and sequence parallel (tp, sp), then context parallel (cp)
//   2. expert parallel
//   3. the pipeline split (pp) of the stages the model has by then
//   4. activation recompute
//   5. the data-parallel family (fsdp, zero, ddp, dp), which reduces what
//      every stage holds
// and within a phase in the order given, except that a strategy comes after
// those it lists in After(). Stable, so the result is deterministic.
void ApplicationOrder(std::vector<std::unique_ptr<Strategy>>& strategies);

struct OrderedStrategies {
  std::vector<std::unique_ptr<Strategy>> strategies;  // application order
  std::vector<StrategyOptionSet> options;             // parallel to strategies
};

// Creates, orders and validates `names` (see the file comment); mesh may be
// null (single process).
absl::StatusOr<OrderedStrategies> OrderAndValidate(const std::vector<std::string>& names,
                                                   const StrategyOptionValues& options,
                                                   const comm::MeshLayout* mesh);

// Parses "ddp", "fsdp,tp" into names (trimmed, empty parts rejected).
absl::StatusOr<std::vector<std::string>> ParseStrategyList(const std::string& list);

// Validates the combination without applying anything (used before the
// mesh and model exist, e.g. by a planner); mesh may be null.
absl::Status ValidateStrategies(const std::vector<std::string>& names,
                                const StrategyOptionValues& options,
                                const comm::MeshLayout* mesh);

// An axis that is not a mesh dimension (ep, carved from dp_shard x cp) of
// size > 1: some strategy in `names` must list it in RequiredAxes.
absl::Status CheckAxisUsed(const std::vector<std::string>& names, const std::string& axis,
                           int size);

// Applies the plan's strategies in its order to ctx's model, folding each
// one's result into `state` (plan notes first). ctx.options is set to each
// strategy's own set and ctx.applied to `state` while it is applied.
absl::Status ApplyPlan(const ParallelPlan& plan, StrategyContext& ctx, ParallelState& state);

// Orders, validates and applies `names` (tests and tools without a plan).
absl::Status ComposeStrategies(const std::vector<std::string>& names,
                               const StrategyOptionValues& options, StrategyContext& ctx,
                               ParallelState& state);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_COMPOSER_H_
