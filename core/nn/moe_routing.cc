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
  RoutingPlan plan;
  const int64_t n = static_cast<int64_t>(experts_of.size()) / k;
  plan.slots.assign(experts_of.size(), -1);
  plan.counts.assign(num_experts, 0);
  plan.routed.assign(num_experts, 0);
  // Pass 1: accept in priority order (choice rank, then token).
  std::vector<bool> kept(experts_of.size(), false);
  for (int j = 0; j < k; ++j) {
    for (int64_t t = 0; t < n; ++t) {
      const int32_t e = experts_of[t * k + j];
      ++plan.routed[e];
      if (capacity >= 0 && plan.counts[e] >= capacity) {
        ++plan.dropped;
        continue;
      }
      ++plan.counts[e];
      kept[t * k + j] = true;
    }
  }
  // Pass 2: rows grouped by expert, tokens in order within an expert.
  std::vector<int64_t> next(num_experts, 0);
  for (int e = 1; e < num_experts; ++e) next[e] = next[e - 1] + plan.counts[e - 1];
  plan.assign.resize(next.back() + plan.counts.back());
  for (int64_t a = 0; a < static_cast<int64_t>(experts_of.size()); ++a) {
    if (!kept[a]) continue;
    const int64_t row = next[experts_of[a]]++;
    plan.slots[a] = static_cast<int32_t>(row);
    plan.assign[row] = static_cast<int32_t>(a);
  }
  return plan;
}

}  // namespace weft
