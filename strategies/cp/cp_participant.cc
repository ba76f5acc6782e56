#include "strategies/cp/cp_participant.h"

#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::cp {

absl::Status CpParticipant::AfterAllGradients(const std::vector<OptimTarget>& targets) {
  // All issued before any wait: the group's worker runs them back to back.
  std::vector<std::shared_ptr<comm::Work>> works;
  works.reserve(targets.size());
  for (const OptimTarget& t : targets) {
    works.push_back(group_->AllReduce(t.grad, {.op = comm::ReduceOp::kSum, .stream = stream_}));
  }
  absl::Status first;
  for (auto& w : works) {
    absl::Status s = w->Wait();
    if (first.ok() && !s.ok()) first = Annotate(s, "gradient all-reduce over the cp group");
  }
  return first;
}

void CpParticipant::AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) {
  const int64_t total = ring_->bytes();
  out->push_back({"cp_ring_mb", static_cast<double>(total - ring_bytes_reported_) / (1 << 20)});
  ring_bytes_reported_ = total;
  if (routing_ == nullptr) return;
  const int64_t routing = routing_->bytes();
  out->push_back(
      {"cp_moe_mb", static_cast<double>(routing - routing_bytes_reported_) / (1 << 20)});
  routing_bytes_reported_ = routing;
}

}  // namespace weft::cp
