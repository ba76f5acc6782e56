#include "core/parallel/reduce_groups.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {

std::vector<std::string> ReduceAxes(const Parameter& p, const std::vector<std::string>& dp_axes) {
  std::vector<std::string> axes;
  for (const std::string& a : dp_axes) {
    if (p.placement().ReplicatedOver(a)) axes.push_back(a);
  }
  return axes;
}

std::vector<ReduceGroup> GroupByReduceAxes(const std::vector<Parameter*>& params,
                                           const std::vector<std::string>& dp_axes) {
  std::vector<ReduceGroup> groups;
  for (Parameter* p : params) {
    std::vector<std::string> axes = ReduceAxes(*p, dp_axes);
    ReduceGroup* group = nullptr;
    for (ReduceGroup& g : groups) {
      if (g.axes == axes) group = &g;
    }
    if (group == nullptr) {
      groups.push_back({std::move(axes), {}});
      group = &groups.back();
    }
    group->params.push_back(p);
  }
  return groups;
}

absl::Status CheckNotShardedOver(const std::vector<Parameter*>& params, const std::string& axis,
                                 const std::string& who) {
  for (const Parameter* p : params) {
    if (p->placement().ShardedOver(axis)) {
      return FailedPrecondition(
          absl::StrCat(who, " shards every parameter over ", axis, ", but ", p->name(),
                       " is already sharded over it (", p->placement().ToString(), ")"),
          absl::StrCat("parameters replicated over ", axis),
          "use ddp for these parameters' data parallelism, or shard them over another axis");
    }
  }
  return absl::OkStatus();
}

}  // namespace weft
