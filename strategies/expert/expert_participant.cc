#include "strategies/expert/expert_participant.h"

#include "absl/container/flat_hash_set.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/grad_norm.h"

namespace weft {

absl::Status ExpertParticipant::AfterAllGradients(const std::vector<OptimTarget>& targets) {
  const absl::flat_hash_set<const Parameter*> experts(params_.begin(), params_.end());
  dense_.clear();
  experts_.clear();
  for (const OptimTarget& t : targets) {
    (t.param != nullptr && experts.contains(t.param) ? experts_ : dense_).push_back(t);
  }
  if (replicas_ == nullptr || replicas_->size() == 1) return absl::OkStatus();
  // After FinishGradients, so a data-parallel strategy's own reduction of
  // the same tensors (over dp_replicate) is complete.
  std::vector<std::shared_ptr<comm::Work>> works;
  for (Parameter* p : params_) {
    // Experts of another pipeline stage have no gradient here (the expert
    // strategy applies before pp splits the model); a replica group lies
    // within one stage, so its ranks skip the same ones.
    if (!p->grad.defined()) continue;
    works.push_back(replicas_->AllReduce(p->grad, {.op = comm::ReduceOp::kSum,
                                                   .stream = kernel_.stream}));
  }
  for (auto& w : works) {
    WEFT_RETURN_IF_ERROR(Annotate(w->Wait(), "expert gradient all-reduce over ep replicas"));
  }
  return absl::OkStatus();
}

absl::Status ExpertParticipant::ReduceGradNormSq(Tensor& norm_sq) {
  if (ep_group_->size() == 1) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(Tensor experts, Tensor::Zeros({1}, DType::kF32, kernel_.device, nullptr,
                                                      kernel_.stream));
  WEFT_RETURN_IF_ERROR(
      GradNormSquared(*ops_, kernel_, experts_, model_parallel_.get(), experts));
  if (state_->grad_norm_sums_dp_shard) {
    // fsdp sums over dp_shard next: this rank's share, as each expert block
    // is on every rank of replicas_.
    const int holders = replicas_ != nullptr ? replicas_->size() : 1;
    WEFT_RETURN_IF_ERROR(ops_->Scale(kernel_, experts, 1.0f / static_cast<float>(holders)));
  } else {
    WEFT_RETURN_IF_ERROR(Annotate(
        ep_group_->AllReduce(experts, {.op = comm::ReduceOp::kSum, .stream = kernel_.stream})
            ->Wait(),
        "gradient norm over the ep group"));
  }
  WEFT_RETURN_IF_ERROR(GradNormSquared(*ops_, kernel_, dense_, model_parallel_.get(), norm_sq));
  return ops_->Add(kernel_, norm_sq, norm_sq, experts);
}

void ExpertParticipant::AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) {
  const comm::OpCounters now =
      ep_group_->stats().by_op[static_cast<int>(comm::OpKind::kAllToAllV)];
  out->push_back({"ep_a2a_payload_mb", (now.payload_bytes - last_.payload_bytes) / 1e6});
  out->push_back({"ep_a2a_bus_mb", (now.bus_bytes - last_.bus_bytes) / 1e6});
  last_ = now;
  int64_t own = 0, expert = 0;
  double wait = 0;
  for (const auto& d : dispatchers_) {
    own += d->own_bytes_sent();
    expert += d->expert_bytes_sent();
    wait += d->exchange_wait_ms();
  }
  out->push_back({"ep_a2a_wait_ms", wait - last_wait_ms_});
  last_wait_ms_ = wait;
  out->push_back({"ep_a2a_own_mb", (own - last_own_) / 1e6});
  out->push_back({"ep_a2a_expert_mb", (expert - last_expert_) / 1e6});
  last_own_ = own;
  last_expert_ = expert;
}

}  // namespace weft
