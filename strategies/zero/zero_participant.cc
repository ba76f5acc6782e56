#include "strategies/zero/zero_participant.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/bucketing.h"
#include "core/parallel/reduce_dtype.h"

namespace weft {
namespace {

// Reduce-scatters in flight at once (stages 2 and 3): bounds the transient
// full-gradient memory while still overlapping communication with backward.

std::vector<Parameter*> OwnParams(Module& m) {
  std::vector<Parameter*> out;
  for (Parameter* p : m.held_own_parameters()) out.push_back(p);
  return out;
}

}  // namespace

absl::Status ZeroParticipant::AddGroup(const std::string& name, std::vector<Parameter*> params,
                                       StrategyContext& ctx) {
  if (params.empty()) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(DType reduce, ReduceDType(*ctx.options, ctx.grad_dtype));
  ShardedGroup::Options o;
  o.params = stage_ == 3 ? ShardedGroup::Mode::kSharded : ShardedGroup::Mode::kFull;
  o.grads = stage_ == 1 ? ShardedGroup::Mode::kFull : ShardedGroup::Mode::kSharded;
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
  resident_.push_back(false);
  return absl::OkStatus();
}

absl::Status ZeroParticipant::Build(StrategyContext& ctx) {
  Model& model = ctx.model();
  if (stage_ == 3) {
    // Shared and root-owned parameters: one group, resident for the step.
    std::vector<Parameter*> resident;
    for (Parameter* p : model.Parameters()) {
      if (p->shared()) resident.push_back(p);
    }
    for (Parameter* p : OwnParams(model)) {
      if (!p->shared()) resident.push_back(p);
    }
    if (!resident.empty()) {
      WEFT_RETURN_IF_ERROR(AddGroup("resident", resident, ctx));
      resident_[0] = true;
    }
    // One group per layer for everything else.
    for (Module* m : model.Modules()) {
      if (m == &model) continue;
      std::vector<Parameter*> own;
      for (Parameter* p : OwnParams(*m)) {
        if (!p->shared()) own.push_back(p);
      }
      if (own.empty()) continue;
      groups_of_module_[m].push_back(groups_.size());
      WEFT_RETURN_IF_ERROR(AddGroup(m->name(), own, ctx));
    }
  } else {
    for (std::vector<Parameter*>& bucket : BucketInBackwardOrder(
             model.Parameters(), ctx.options->GetDouble("bucket_mb"), DTypeSize(ctx.grad_dtype))) {
      WEFT_RETURN_IF_ERROR(
          AddGroup(absl::StrCat("bucket", groups_.size()), std::move(bucket), ctx));
    }
  }
  InstallHooks(model);
  return absl::OkStatus();
}

void ZeroParticipant::InstallHooks(Model& model) {
  using HP = Module::HookPoint;
  if (stage_ == 3) {
    // Root: resident parameters live from forward start to backward end.
    model.AddHook(HP::kPreForward, [this](Module&, RunContext&) -> absl::Status {
      for (size_t g = 0; g < groups_.size(); ++g) {
        if (resident_[g]) WEFT_RETURN_IF_ERROR(groups_[g]->Gather(false));
      }
      return absl::OkStatus();
    });
    model.AddHook(HP::kPostForward, [this](Module&, RunContext& ctx) -> absl::Status {
      if (ctx.training) return absl::OkStatus();
      for (size_t g = 0; g < groups_.size(); ++g) {
        if (resident_[g]) groups_[g]->ReleaseFull();
      }
      return absl::OkStatus();
    });
    for (auto& [module, ids] : groups_of_module_) {
      Module* m = const_cast<Module*>(module);
      m->AddHook(HP::kPreForward, [this, ids = ids](Module&, RunContext&) -> absl::Status {
        for (size_t g : ids) WEFT_RETURN_IF_ERROR(groups_[g]->Gather(false));
        return absl::OkStatus();
      });
      m->AddHook(HP::kPostForward, [this, ids = ids](Module&, RunContext&) -> absl::Status {
        for (size_t g : ids) groups_[g]->ReleaseFull();
        return absl::OkStatus();
      });
    }
  }
  if (stage_ >= 2) {
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
      m->AddHook(HP::kPreBackward,
                 [this](Module& mod, RunContext&) { return OnPreBackward(mod); });
      m->AddHook(HP::kPostBackward,
                 [this](Module& mod, RunContext&) { return OnPostBackward(mod); });
    }
  }
}

absl::Status ZeroParticipant::OnPreBackward(Module& m) {
  for (Parameter* p : m.held_own_parameters()) {
    auto it = group_of_.find(p);
    if (it == group_of_.end()) continue;
    ShardedGroup& g = *groups_[it->second];
    if (stage_ == 3) WEFT_RETURN_IF_ERROR(g.Gather(false));
    WEFT_RETURN_IF_ERROR(g.PrepareGrads());
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

absl::Status ZeroParticipant::LaunchReduce(size_t g) {
  ShardedGroup& group = *groups_[g];
  WEFT_RETURN_IF_ERROR(reduces_.Launch(group));
  // Parameters of a finished layer are not needed until the next forward.
  if (stage_ == 3 && !resident_[g]) group.ReleaseFull();
  return absl::OkStatus();
}

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
    if (stage_ == 3 && resident_[g]) groups_[g]->ReleaseFull();
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
  if (stage_ == 3) return absl::OkStatus();
  for (auto& g : groups_) WEFT_RETURN_IF_ERROR(g->AllGatherInPlace());
  return absl::OkStatus();
}


}  // namespace weft
