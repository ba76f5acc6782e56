// ComposeStrategies: creates the named strategies, orders them by phase
// (tensor/sequence parallel, expert, pipeline, recompute, data parallel),
// validates every one against the mesh before applying any, then applies
// them in that order. Names may repeat only by mistake: a duplicate is an
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
#include "core/parallel/strategy.h"
#include "core/parallel/strategy_options.h"

namespace weft {

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

// ctx.options is set to each strategy's own set while it is applied.
absl::Status ComposeStrategies(const std::vector<std::string>& names,
                               const StrategyOptionValues& options, StrategyContext& ctx);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_COMPOSER_H_
