// Per-parameter reduce groups for the data-parallel strategies.
//
// A gradient is summed over the data-parallel axes its parameter is
// replicated over, and not over an axis it is sharded over: an expert
// sharded over the ranks of dp_shard reduces only over dp_replicate (the
// ranks holding the same experts), while dense weights reduce over both.
// ddp buckets each group separately and reduces it over its own axes; zero
// flat-shards over dp_shard, so it refuses parameters already sharded over
// it; fsdp keeps those whole and leaves their reduction to the strategy
// that placed them (expert).
#ifndef WEFT_CORE_PARALLEL_REDUCE_GROUPS_H_
#define WEFT_CORE_PARALLEL_REDUCE_GROUPS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/nn/parameter.h"

namespace weft {

// The axes of `dp_axes` (in their order) that `p` is replicated over.
std::vector<std::string> ReduceAxes(const Parameter& p, const std::vector<std::string>& dp_axes);

struct ReduceGroup {
  std::vector<std::string> axes;  // empty: nothing to reduce
  std::vector<Parameter*> params;  // in the order given
};

// Parameters grouped by ReduceAxes; groups in order of first appearance.
std::vector<ReduceGroup> GroupByReduceAxes(const std::vector<Parameter*>& params,
                                           const std::vector<std::string>& dp_axes);

// An error naming the first parameter already sharded over `axis`, for a
// strategy (`who`) that shards every parameter over it itself.
absl::Status CheckNotShardedOver(const std::vector<Parameter*>& params, const std::string& axis,
                                 const std::string& who);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_REDUCE_GROUPS_H_
