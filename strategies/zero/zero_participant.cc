#include "strategies/zero/zero_participant.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/bucketing.h"
#include "core/parallel/reduce_dtype.h"

namespace weft {
absl::Status ZeroParticipant::AddGroup(const std::string& name, std::vector<Parameter*> params,
                                       StrategyContext& ctx) {
  if (params.empty()) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(DType reduce, ReduceDType(*ctx.options, ctx.grad_dtype));
  ShardedGroup::Options o;
  o.params = ShardedGroup::Mode::kFull;
  // Over one rank a gradient shard is the whole gradient: keep it whole
  // rather than reduce into a second buffer.
  o.grads = stage_ == 1 || group_->size() == 1 ? ShardedGroup::Mode::kFull
                                                : ShardedGroup::Mode::kSharded;
  o.device = ctx.run->device;
  o.stream = stream_;
  o.grad_dtype = ctx.grad_dtype;
  o.reduce_dtype = reduce;
  o.ops = ctx.run->ops;
  o.axis = "dp_replicate+dp_shard";  // zero shards over the whole dp group
  o.param_allocator = ctx.param_allocator;
  o.grad_allocator = ctx.grad_allocator;
  WEFT_ASSIGN_OR_RETURN(auto g, ShardedGroup::Create(name, params, group_, o));
  for (Parameter* p : params) group_of_[p] = groups_.size();
  groups_.push_back(std::move(g));
  pending_.push_back(0);
  return absl::OkStatus();
}

absl::Status ZeroParticipant::Build(StrategyContext& ctx, StrategyResult& result) {
  if (stage_ != 1 && stage_ != 2) {
    return Internal(absl::StrCat("ZeroParticipant for stage ", stage_), "stage 1 or 2");
  }
  if (stage_ == 2 && group_->size() == 1) {
    result.notes.push_back(
        "zero-2 over a data-parallel group of one rank: gradients stay whole (nothing to shard)");
  }
  Model& model = ctx.model();
  for (std::vector<Parameter*>& bucket : BucketInBackwardOrder(
           model.Parameters(), ctx.options->GetDouble("bucket_mb"), DTypeSize(ctx.grad_dtype))) {
    WEFT_RETURN_IF_ERROR(AddGroup(absl::StrCat("bucket", groups_.size()), std::move(bucket), ctx));
  }
  InstallHooks(model);
  return absl::OkStatus();
}

void ZeroParticipant::InstallHooks(Model& model) {
  using HP = Module::HookPoint;
  if (stage_ < 2) return;
  model.AddHook(HP::kPreBackward, [this](Module&, RunContext&) -> absl::Status {
    // Shared parameters receive gradients before their owner's backward.
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (Parameter* p : groups_[g]->flat().params()) {
        if (p->shared()) {
          WEFT_RETURN_IF_ERROR(groups_[g]->PrepareGrads());
          break;
        }
      }
    }
    return absl::OkStatus();
  });
  for (Module* m : model.Modules()) {
    if (m->held_own_parameters().empty()) continue;
    m->AddHook(HP::kPreBackward, [this](Module& mod, RunContext&) { return OnPreBackward(mod); });
    m->AddHook(HP::kGradientsReady, [this](Module& mod, RunContext&) { return OnPostBackward(mod); });
  }
}

absl::Status ZeroParticipant::OnPreBackward(Module& m) {
  for (Parameter* p : m.held_own_parameters()) {
    auto it = group_of_.find(p);
    if (it == group_of_.end()) continue;
    WEFT_RETURN_IF_ERROR(groups_[it->second]->PrepareGrads());
  }
  return absl::OkStatus();
}

absl::Status ZeroParticipant::OnPostBackward(Module& m) {
  for (Parameter* p : m.held_own_parameters()) {
    auto it = group_of_.find(p);
    if (it == group_of_.end()) continue;
    if (--pending_[it->second] == 0) WEFT_RETURN_IF_ERROR(LaunchReduce(it->second));
  }
  return absl::OkStatus();
}

absl::Status ZeroParticipant::LaunchReduce(size_t g) { return reduces_.Launch(*groups_[g]); }

absl::Status ZeroParticipant::ZeroGrad() {
  for (auto& g : groups_) WEFT_RETURN_IF_ERROR(g->ZeroShardGrad());
  return absl::OkStatus();
}

absl::Status ZeroParticipant::BeforeBackward(const BackwardInfo&) {
  // A reduce-scatter still running from the previous backward owns its
  // full gradient buffer: finish it before backward writes new gradients.
  WEFT_RETURN_IF_ERROR(reduces_.Drain());
  for (size_t g = 0; g < groups_.size(); ++g) {
    pending_[g] = static_cast<int>(groups_[g]->flat().params().size());
  }
  return absl::OkStatus();
}

absl::Status ZeroParticipant::FinishGradients() {
  if (stage_ == 1) {
    // Once per step: full gradients accumulated over every micro-batch.
    for (auto& g : groups_) WEFT_RETURN_IF_ERROR(g->ReduceGrads(/*async=*/true));
    for (auto& g : groups_) WEFT_RETURN_IF_ERROR(g->FinishReduce());
    return absl::OkStatus();
  }
  WEFT_RETURN_IF_ERROR(reduces_.Drain());
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (pending_[g] > 0) {
      // Some parameters took no part in backward (unused); whatever
      // gradient the group has still has to be reduced on every rank.
      WEFT_RETURN_IF_ERROR(groups_[g]->PrepareGrads());
      WEFT_RETURN_IF_ERROR(groups_[g]->ReduceGrads(/*async=*/false));
      pending_[g] = 0;
    }
  }
  return absl::OkStatus();
}

std::optional<std::vector<OptimTarget>> ZeroParticipant::OptimizerTargets() {
  std::vector<OptimTarget> targets;
  for (auto& g : groups_) {
    for (OptimTarget& t : g->OptimizerTargets()) targets.push_back(std::move(t));
  }
  return targets;
}

absl::Status ZeroParticipant::ReduceGradNormSq(Tensor& norm_sq) {
  // Shards are disjoint: the global squared norm is the sum over ranks.
  return Annotate(group_->AllReduce(norm_sq, {.op = comm::ReduceOp::kSum, .stream = stream_})
                      ->Wait(),
                  "zero gradient norm");
}

absl::Status ZeroParticipant::AfterOptimizerStep() {
  for (auto& g : groups_) WEFT_RETURN_IF_ERROR(g->AllGatherInPlace());
  return absl::OkStatus();
}


}  // namespace weft
