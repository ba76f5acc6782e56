// local_sgd: data parallelism without per-step gradient communication,
// loaded as a plugin (--plugin=libweft_local_sgd.so --strategy=local_sgd).
//
// - At Apply, parameters are broadcast from data-parallel rank 0.
// - Every step, each rank steps its optimizer on its own gradients, scaled
//   by the data-parallel size so that they are the mean over the rank's own
//   samples (the trainer scales the loss by 1 / global_batch, for a sum
//   over ranks that local_sgd never takes). Clipping, when on, uses this
//   rank's own gradient norm.
// - Every `sync_every` steps, right after the optimizer update, the
//   parameters are averaged over the data-parallel ranks (all-reduce avg).
//   Optimizer state (AdamW moments, SGD momentum) stays per rank.
// With plain SGD (any momentum, no clipping) and sync_every=1 this is ddp
// up to rounding: the average of the updates is the update of the average.
//
// Limits, refused or noted: parameters kept in a lower precision than the
// optimizer's fp32 masters (the masters, which a participant cannot reach,
// would undo the average); checkpoints record rank 0's replica only; the
// sync phase restarts at 0 after a resume (a participant sees no step index).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/reduce_groups.h"
#include "core/parallel/strategy.h"
#include "core/parallel/strategy_registry.h"

namespace weft {
namespace {

const std::vector<std::string> kDataParallelAxes = {"dp_replicate", "dp_shard"};

// One parameter and the ranks it is averaged over.
struct Replicated {
  Parameter* param;
  std::shared_ptr<comm::ProcessGroup> group;
};

class LocalSgdParticipant : public StepParticipant {
 public:
  LocalSgdParticipant(RunContext* run, std::vector<Replicated> params, int64_t sync_every)
      : run_(run), params_(std::move(params)), sync_every_(sync_every) {}

  // Gradients are final on this rank (nothing to wait for): turn each
  // 1 / global_batch-scaled sum into this rank's mean.
  absl::Status FinishGradients() override {
    ++step_;
    sync_now_ = step_ % sync_every_ == 0;
    for (const Replicated& r : params_) {
      const float scale = static_cast<float>(r.group->size());
      if (!r.param->grad.defined() || scale == 1.f) continue;
      WEFT_RETURN_IF_ERROR(run_->ops->Scale(run_->kernel(), r.param->grad, scale));
    }
    return absl::OkStatus();
  }

  // Also called after a checkpoint is loaded (all ranks then hold rank 0's
  // values): only a step that FinishGradients marked averages.
  absl::Status AfterOptimizerStep() override {
    if (!sync_now_) return absl::OkStatus();
    sync_now_ = false;
    std::vector<std::shared_ptr<comm::Work>> works;
    for (const Replicated& r : params_) {
      works.push_back(r.group->AllReduce(r.param->value,
                                         {.op = comm::ReduceOp::kAvg, .stream = run_->stream}));
    }
    for (auto& w : works) {
      const absl::Status s = w->Wait();
      if (!s.ok()) return Annotate(s, "local_sgd parameter average");
    }
    ++syncs_;
    return absl::OkStatus();
  }

  void AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) override {
    out->push_back({"local_sgd_syncs", static_cast<double>(syncs_)});
  }

 private:
  RunContext* run_;
  std::vector<Replicated> params_;
  int64_t sync_every_;
  int64_t step_ = 0;
  int64_t syncs_ = 0;
  bool sync_now_ = false;
};

class LocalSgdStrategy : public Strategy {
 public:
  std::string Name() const override { return "local_sgd"; }
  StrategyPhase Phase() const override { return StrategyPhase::kDataParallel; }
  std::vector<std::string> RequiredAxes() const override { return kDataParallelAxes; }

  OptionSchema Options() const override {
    OptionSchema s;
    s.Int("sync_every", 4,
          "average the parameters over data-parallel ranks every N optimizer steps "
          "(1: every step, as ddp for plain SGD)");
    return s;
  }

  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override {
    if (mesh == nullptr) {
      return FailedPrecondition("local_sgd without a device mesh", "a job started with a mesh",
                                "the runtime builds one whenever --strategy is set");
    }
    const int64_t k = options.GetInt("sync_every");
    if (k < 1) {
      return InvalidArgument(absl::StrCat("local_sgd.sync_every=", k), "sync_every >= 1",
                             "e.g. --strategy_options=sync_every=4 (1 averages every step)");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override {
    StrategyResult result;
    std::vector<Replicated> params;
    for (Parameter* p : ctx.model().Parameters()) {
      const std::vector<std::string> axes = ReduceAxes(*p, kDataParallelAxes);
      if (axes.empty()) continue;  // sharded over every dp axis: nothing to average
      if (p->value.dtype() != DType::kF32) {
        return FailedPrecondition(
            absl::StrCat("local_sgd with parameter ", p->name(), " in ",
                         DTypeName(p->value.dtype())),
            "f32 parameters (the optimizer's fp32 masters would undo each average)",
            "train with f32 parameters, or use ddp");
      }
      WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> group,
                            ctx.mesh->FlatGroup(axes));
      WEFT_RETURN_IF_ERROR(
          group->Broadcast(p->value, {.root = 0, .stream = ctx.run->stream})->Wait());
      params.push_back({p, std::move(group)});
    }
    const int64_t k = ctx.options->GetInt("sync_every");
    result.notes.push_back(absl::StrCat(
        "local_sgd: parameters averaged every ", k,
        " steps; optimizer state stays per rank and checkpoints keep rank 0's replica"));
    result.participants.push_back(
        std::make_unique<LocalSgdParticipant>(ctx.run, std::move(params), k));
    return result;
  }
};

}  // namespace
}  // namespace weft

WEFT_REGISTER_STRATEGY(local_sgd, [] { return std::make_unique<weft::LocalSgdStrategy>(); });
