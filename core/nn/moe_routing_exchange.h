// RoutingExchange: lets a MoE layer route tokens that several ranks hold as
// one routing group, as one process holding all of them would. Context
// parallelism installs one (strategies/cp/cp_routing_exchange.h): each cp
// rank holds chunks of every sequence, but the capacity, the drop order and
// the balance loss span whole sequences. Without one the layer's tokens are
// the whole group, and the layer knows no ranks either way.
//
// Per layer call, in order, on every rank of the group:
//   Gather  every rank's top-k choices, in the group's token order, and
//           where this rank's tokens sit in it (always: the drop decisions
//           and the balance loss's f_e need all choices; recompute replays
//           gather again, since nothing of the forward is kept);
//   Sum     statistics (the balance loss's P_e and the z-loss's sum), only
//           when they are counted: metrics, never gradients.
#ifndef WEFT_CORE_NN_MOE_ROUTING_EXCHANGE_H_
#define WEFT_CORE_NN_MOE_ROUTING_EXCHANGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/run_context.h"
#include "core/tensor/tensor.h"

namespace weft {

class RoutingExchange {
 public:
  virtual ~RoutingExchange() = default;

  struct Choices {
    // (samples, tokens_per_sample, k): the whole group's choices, best
    // first per token, tokens in global order (sample, then position).
    std::vector<int32_t> experts_of;
    // (N local): the index in that order of this rank's local token t.
    std::vector<int64_t> local_index;
  };

  // `idx` (N, k) int32 on ctx.device: this rank's choices for its tokens of
  // `samples` samples (N / samples each). Blocks the host until the choices
  // are there (the routing plan is built on the host anyway).
  virtual absl::StatusOr<Choices> Gather(RunContext& ctx, const Tensor& idx, int64_t samples) = 0;

  // Sums `values` over the group's ranks, in place; every rank gets the
  // same bits (the partial sums are added in rank order).
  virtual absl::Status Sum(RunContext& ctx, std::vector<double>& values) = 0;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_MOE_ROUTING_EXCHANGE_H_
