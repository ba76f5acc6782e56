#include "strategies/tp/replicated_head_grads.h"

#include "absl/container/flat_hash_set.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::tp {

absl::Status ReplicatedHeadGrads::AfterAllGradients(const std::vector<OptimTarget>& targets) {
  const absl::flat_hash_set<const Parameter*> replicated(params_.begin(), params_.end());
  std::vector<std::shared_ptr<comm::Work>> works;
  for (const OptimTarget& t : targets) {
    if (t.param == nullptr || !replicated.contains(t.param) || !t.grad.defined()) continue;
    Tensor g = t.grad;
    works.push_back(holders_->AllReduce(g, {.op = comm::ReduceOp::kSum, .stream = stream_}));
  }
  for (auto& w : works) {
    WEFT_RETURN_IF_ERROR(Annotate(w->Wait(), "tp: summing replicated K/V heads' gradients"));
  }
  return absl::OkStatus();
}

}  // namespace weft::tp
