// CpRoutingExchange: MoE routing over whole sequences under context
// parallelism (core/nn/moe_routing_exchange.h). Each cp rank holds zigzag
// chunks of every sequence (zigzag.h); the routing group of a micro-batch
// is the whole sequences, as in one process. So every MoE layer call:
//   Gather  all_gather over the cp group of each rank's top-k choices,
//           reordered into global token order (sample, position): every
//           rank then builds the one-process plan (capacity per expert over
//           the whole group, first choices before second ones, tokens in
//           global order) and keeps its own tokens' rows. Each rank
//           receives (cp - 1) x N x k x 4 bytes (N: its tokens, B x T / cp).
//   Sum     all_gather of the balance loss's probability sums and the
//           z-loss's sum as (routing_groups x E + 1) doubles, added in
//           rank order: (cp - 1) x (routing_groups x E + 1) x 8 bytes
//           received, only on counted forwards (not on recompute replays
//           or evaluation). Metrics only.
// Both block the host, which the layer does anyway to plan on the host:
// on CUDA the gather replaces its device-to-host copy of the choices.
// One exchange serves every MoE layer; it counts the bytes it received.
#ifndef WEFT_STRATEGIES_CP_CP_ROUTING_EXCHANGE_H_
#define WEFT_STRATEGIES_CP_CP_ROUTING_EXCHANGE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/process_group/process_group.h"
#include "core/nn/moe_routing_exchange.h"

namespace weft::cp {

// Index in global token order (b * 2 * cp * chunk_len + position) of each
// of `rank`'s local tokens ((samples, 2 * chunk_len), sample-major).
std::vector<int64_t> ZigzagTokenIndex(int rank, int cp, int64_t chunk_len, int64_t samples);

// `gathered`: every rank's (samples, 2 * chunk_len, k) choices in rank
// order -> (samples, 2 * cp * chunk_len, k) in global token order.
std::vector<int32_t> OrderZigzagChoices(const std::vector<int32_t>& gathered, int cp,
                                        int64_t chunk_len, int64_t samples, int k);

class CpRoutingExchange : public RoutingExchange {
 public:
  // `group`: the cp ranks, group rank = cp coordinate.
  explicit CpRoutingExchange(std::shared_ptr<comm::ProcessGroup> group)
      : group_(std::move(group)) {}

  // Needs ctx.sequence set to this rank's zigzag chunks (the cp model sets
  // it); anything else (e.g. sequence parallelism's sub-blocks) is refused.
  absl::StatusOr<Choices> Gather(RunContext& ctx, const Tensor& idx, int64_t samples) override;
  absl::Status Sum(RunContext& ctx, std::vector<double>& values) override;

  // Bytes received from the other cp ranks so far.
  int64_t bytes() const { return bytes_.load(); }

 private:
  std::shared_ptr<comm::ProcessGroup> group_;
  std::atomic<int64_t> bytes_{0};
};

}  // namespace weft::cp

#endif  // WEFT_STRATEGIES_CP_CP_ROUTING_EXCHANGE_H_
