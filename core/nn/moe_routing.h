// Routing plan of a mixture-of-experts layer: which of the router's top-k
// choices each expert accepts, and where each accepted choice sits in the
// buffer that groups tokens by expert. Pure host arithmetic.
//
// Drop policy. With a capacity (capacity_factor > 0), each expert accepts
// at most capacity = ceil(capacity_factor * N * k / E) choices of the N
// tokens routed together. Choices are offered by rank first, then by token:
// every token's first choice (tokens in order), then every second choice, so
// a token loses its second expert before another token loses its first. A
// dropped choice contributes nothing (its gate is not renormalised over the
// kept ones); a token whose choices are all dropped passes through the
// layer's residual connection unchanged. capacity_factor <= 0 is dropless.
//
// Routing groups. Tokens may be split into groups that are routed
// independently, each with its own capacity (one process emulating how
// data-parallel ranks each route their own share of a batch). Rows of one
// expert are ordered by group, then by token.
//
// Tokens on several ranks. When a routing group's tokens are spread over
// ranks (context parallelism holds chunks of each sequence), every rank
// builds the group's plan from the whole group's choices in global token
// order and keeps its own tokens' rows (SubsetRoutingPlan): the drop
// decisions are exactly those of one process routing the whole group.
#ifndef WEFT_CORE_NN_MOE_ROUTING_H_
#define WEFT_CORE_NN_MOE_ROUTING_H_

#include <cstdint>
#include <vector>

namespace weft {

// ceil(factor * tokens * k / experts), at least 1; -1 (no limit) when
// factor <= 0.
int64_t ExpertCapacity(int64_t tokens, int k, int experts, double capacity_factor);

struct RoutingPlan {
  std::vector<int32_t> slots;   // (N * k): row in the grouped buffer, -1 dropped
  std::vector<int32_t> assign;  // (M): choice index t * k + j of each row
  std::vector<int64_t> counts;  // (E): accepted rows per expert
  std::vector<int64_t> routed;  // (E): choices per expert before the capacity
  int64_t dropped = 0;          // choices dropped
};

// `experts_of` (N * k) are the router's choices, best first per token;
// one routing group, `capacity` per expert (-1: none).
RoutingPlan BuildRoutingPlan(const std::vector<int32_t>& experts_of, int k, int num_experts,
                             int64_t capacity);

// Several groups: `group_of` (N) gives each token's group in [0, groups),
// `capacity_of` (groups) each group's capacity per expert (-1: none).
RoutingPlan BuildGroupedRoutingPlan(const std::vector<int32_t>& experts_of, int k,
                                    int num_experts, const std::vector<int>& group_of,
                                    const std::vector<int64_t>& capacity_of);

// The rows of some of a group's tokens, with the decisions `group_plan`
// took over all of them: `experts_of` and `group_of` are the whole group's
// (as passed to BuildGroupedRoutingPlan), local token t is token
// local_index[t] there. Rows are grouped by expert, then by routing group,
// then local token; routed and dropped count the local tokens' choices.
RoutingPlan SubsetRoutingPlan(const RoutingPlan& group_plan, const std::vector<int32_t>& experts_of,
                              int k, int num_experts, const std::vector<int>& group_of, int groups,
                              const std::vector<int64_t>& local_index);

}  // namespace weft

#endif  // WEFT_CORE_NN_MOE_ROUTING_H_
