// CpParticipant: the cp strategy's part in the step. Every parameter is
// replicated over the cp ranks, and each rank's gradient covers only the
// targets of its chunks: once all gradients are final (and, under fsdp or
// zero, reduced to this rank's shards) they are summed over the cp group.
// Also reports the ring's traffic per step (cp_ring_mb) and, for MoE
// models, the routing exchange's (cp_moe_mb: bytes received).
#ifndef WEFT_STRATEGIES_CP_CP_PARTICIPANT_H_
#define WEFT_STRATEGIES_CP_CP_PARTICIPANT_H_

#include <memory>

#include "comm/process_group/process_group.h"
#include "core/parallel/step_participant.h"
#include "strategies/cp/cp_routing_exchange.h"
#include "strategies/cp/ring.h"

namespace weft::cp {

class CpParticipant : public StepParticipant {
 public:
  // `routing`: null for a dense model.
  CpParticipant(std::shared_ptr<comm::ProcessGroup> cp_group, std::shared_ptr<Ring> ring,
                std::shared_ptr<CpRoutingExchange> routing, NativeStream stream)
      : group_(std::move(cp_group)),
        ring_(std::move(ring)),
        routing_(std::move(routing)),
        stream_(stream) {}

  absl::Status AfterAllGradients(const std::vector<OptimTarget>& targets) override;
  void AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) override;

 private:
  std::shared_ptr<comm::ProcessGroup> group_;
  std::shared_ptr<Ring> ring_;
  std::shared_ptr<CpRoutingExchange> routing_;
  NativeStream stream_;
  int64_t ring_bytes_reported_ = 0, routing_bytes_reported_ = 0;
};

}  // namespace weft::cp

#endif  // WEFT_STRATEGIES_CP_CP_PARTICIPANT_H_
