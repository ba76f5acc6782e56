// NarrowParameter: a strategy adds a Shard to a parameter that is already
// materialized (the expert strategy splits experts over dp_shard, tp splits
// their hidden units): the parameter keeps its new local box of the values
// it holds, and gets fresh zero gradients of the new shape.
#ifndef WEFT_CORE_PARALLEL_NARROW_PARAMETER_H_
#define WEFT_CORE_PARALLEL_NARROW_PARAMETER_H_

#include <string>

#include "absl/status/status.h"
#include "core/nn/parameter.h"
#include "core/parallel/strategy.h"

namespace weft {

// Adds Shard(dim) over `axis` (block `index` of `count`) to p's placement
// and slices p's value to it.
absl::Status NarrowParameter(Parameter& p, const std::string& axis, int dim, int index,
                             int count, StrategyContext& ctx);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_NARROW_PARAMETER_H_
