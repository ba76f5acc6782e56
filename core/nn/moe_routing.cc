#include "core/nn/moe_routing.h"

#include <algorithm>
#include <cmath>

namespace weft {

int64_t ExpertCapacity(int64_t tokens, int k, int experts, double capacity_factor) {
  if (capacity_factor <= 0) return -1;
  const double c = std::ceil(capacity_factor * static_cast<double>(tokens) * k / experts);
  return std::max<int64_t>(1, static_cast<int64_t>(c));
}

RoutingPlan BuildRoutingPlan(const std::vector<int32_t>& experts_of, int k, int num_experts,
                             int64_t capacity) {
  return BuildGroupedRoutingPlan(experts_of, k, num_experts,
                                 std::vector<int>(experts_of.size() / k, 0), {capacity});
}

namespace {

// Rows grouped by expert, then by group, tokens in order, for the choices
// `kept` marks; fills slots, assign and counts.
void LayoutRows(const std::vector<int32_t>& experts_of, int k, int num_experts,
                const std::vector<int>& group_of, size_t groups, const std::vector<bool>& kept,
                RoutingPlan& plan) {
  const int64_t n = static_cast<int64_t>(experts_of.size()) / k;
  plan.slots.assign(experts_of.size(), -1);
  plan.counts.assign(num_experts, 0);
  std::vector<int64_t> taken(groups * num_experts, 0);  // (group, expert)
  for (int64_t t = 0; t < n; ++t) {
    for (int j = 0; j < k; ++j) {
      if (kept[t * k + j]) ++taken[group_of[t] * num_experts + experts_of[t * k + j]];
    }
  }
  std::vector<int64_t> next(groups * num_experts, 0);
  int64_t row = 0;
  for (int e = 0; e < num_experts; ++e) {
    for (size_t g = 0; g < groups; ++g) {
      next[g * num_experts + e] = row;
      row += taken[g * num_experts + e];
      plan.counts[e] += taken[g * num_experts + e];
    }
  }
  plan.assign.resize(row);
  for (int64_t t = 0; t < n; ++t) {
    for (int j = 0; j < k; ++j) {
      const int64_t a = t * k + j;
      if (!kept[a]) continue;
      const int64_t r = next[group_of[t] * num_experts + experts_of[a]]++;
      plan.slots[a] = static_cast<int32_t>(r);
      plan.assign[r] = static_cast<int32_t>(a);
    }
  }
}

}  // namespace

RoutingPlan BuildGroupedRoutingPlan(const std::vector<int32_t>& experts_of, int k,
                                    int num_experts, const std::vector<int>& group_of,
                                    const std::vector<int64_t>& capacity_of) {
  RoutingPlan plan;
  const int64_t n = static_cast<int64_t>(experts_of.size()) / k;
  const size_t groups = capacity_of.size();
  plan.routed.assign(num_experts, 0);
  // Accept in priority order (choice rank, then token), per group.
  std::vector<int64_t> used(groups * num_experts, 0);  // (group, expert)
  std::vector<bool> kept(experts_of.size(), false);
  for (int j = 0; j < k; ++j) {
    for (int64_t t = 0; t < n; ++t) {
      const int32_t e = experts_of[t * k + j];
      const int g = group_of[t];
      ++plan.routed[e];
      int64_t& u = used[g * num_experts + e];
      if (capacity_of[g] >= 0 && u >= capacity_of[g]) {
        ++plan.dropped;
        continue;
      }
      ++u;
      kept[t * k + j] = true;
    }
  }
  LayoutRows(experts_of, k, num_experts, group_of, groups, kept, plan);
  return plan;
}

RoutingPlan SubsetRoutingPlan(const RoutingPlan& group_plan, const std::vector<int32_t>& experts_of,
                              int k, int num_experts, const std::vector<int>& group_of, int groups,
                              const std::vector<int64_t>& local_index) {
  const size_t n = local_index.size();
  std::vector<int32_t> local(n * k);
  std::vector<int> local_group(n);
  std::vector<bool> kept(n * k);
  RoutingPlan plan;
  plan.routed.assign(num_experts, 0);
  for (size_t t = 0; t < n; ++t) {
    const int64_t src = local_index[t];
    local_group[t] = group_of[src];
    for (int j = 0; j < k; ++j) {
      local[t * k + j] = experts_of[src * k + j];
      kept[t * k + j] = group_plan.slots[src * k + j] >= 0;
      ++plan.routed[local[t * k + j]];
      if (!kept[t * k + j]) ++plan.dropped;
    }
  }
  LayoutRows(local, k, num_experts, local_group, groups, kept, plan);
  return plan;
}

}  // namespace weft
