#include "strategies/pp/pipeline_model.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/pp/pipeline_schedule.h"

namespace weft::pp {

PipelineModel::PipelineModel(std::unique_ptr<Model> inner, std::vector<Stage> stages,
                             std::vector<ChunkRange> chunks, int virtual_stages,
                             std::unique_ptr<PipeLinks> links, Boundary boundary)
    : WrappedModel("Pipeline", std::move(inner)),
      stages_(std::move(stages)),
      chunks_(std::move(chunks)),
      virtual_stages_(virtual_stages),
      links_(std::move(links)),
      boundary_(std::move(boundary)) {}

absl::StatusOr<StageTensor> PipelineModel::ExpectedInput(const RunContext& ctx, int chunk,
                                                         const PipeBatch& batch) const {
  WEFT_ASSIGN_OR_RETURN(StageTensor t, inner().StageInput(ctx, batch.part, chunks_[chunk].first));
  if (boundary_) return boundary_(t);
  return t;
}

std::string PipelineModel::Summary() const {
  std::string s = absl::StrCat(inner().Summary(), " | pipeline rank ", links_->rank(), "/",
                               links_->size(), ":");
  for (const ChunkRange& c : chunks_) {
    absl::StrAppend(&s, " ", stages_[c.first].name, "..", stages_[c.last - 1].name);
  }
  return s;
}

absl::StatusOr<PipeBatch> PipelineModel::LocalPart(const RunContext& ctx, const Tensor& inputs,
                                                    const Tensor& targets,
                                                    float dloss_scale) const {
  WEFT_ASSIGN_OR_RETURN(StageBatch part, inner().LocalBatch(ctx, inputs, targets));
  return PipeBatch{std::move(part), dloss_scale};
}

absl::Status PipelineModel::RefreshStages() {
  std::vector<Stage> now = inner().Stages();
  bool same = now.size() == stages_.size();
  for (size_t s = 0; same && s < now.size(); ++s) same = now[s].name == stages_[s].name;
  if (!same) {
    return Internal(absl::StrCat("the model's stages changed after pp split it (", stages_.size(),
                                 " stages, now ", now.size(), ")"),
                    "the same stages, possibly wrapped (recompute)");
  }
  stages_ = std::move(now);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> PipelineModel::ForwardChunk(RunContext& ctx, int chunk, int micro,
                                                   const PipeBatch& batch) {
  const ChunkRange& c = chunks_[chunk];
  const int vs = VirtualStage(chunk);
  const bool first = vs == 0, last = vs == virtual_stages_ - 1;
  SequenceScope sequence(ctx, batch.part.sequence);
  StageRangeScope range(ctx, {c.first, c.last});
  Tensor x = batch.part.inputs;
  if (!first) {
    WEFT_ASSIGN_OR_RETURN(
        x, links_->RecvForward(Tag(micro, vs - 1), ctx, ExpectedInput(ctx, chunk, batch)));
  }
  Tensor out;
  // Root hooks (e.g. fsdp's root unit) wrap every chunk this rank runs.
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/false, [&]() -> absl::Status {
    LossInputs loss;
    if (last) loss = {&batch.part.targets, batch.dloss_scale};
    WEFT_ASSIGN_OR_RETURN(out, ForwardStages(ctx, stages_, c.first, c.last, x, loss));
    return absl::OkStatus();
  }));
  if (last) return out;
  WEFT_RETURN_IF_ERROR(links_->SendForward(out, Tag(micro, vs), ctx.stream));
  return Tensor();
}

absl::Status PipelineModel::BackwardChunk(RunContext& ctx, int chunk, int micro,
                                          const PipeBatch& batch) {
  const ChunkRange& c = chunks_[chunk];
  const int vs = VirtualStage(chunk);
  SequenceScope sequence(ctx, batch.part.sequence);
  StageRangeScope range(ctx, {c.first, c.last});
  Tensor dy;
  if (vs != virtual_stages_ - 1) {
    WEFT_ASSIGN_OR_RETURN(dy, links_->RecvBackward(Tag(micro, vs), ctx));
  }
  Tensor dx;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/true, [&]() -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(dx, BackwardStages(ctx, stages_, c.first, c.last, dy));
    return absl::OkStatus();
  }));
  if (vs == 0) return absl::OkStatus();
  if (!dx.defined()) {
    return Internal(absl::StrCat("stage ", stages_[c.first].name, " gave no input gradient"),
                    "a gradient to send to the previous pipeline stage");
  }
  return links_->SendBackward(dx, Tag(micro, vs - 1), ctx.stream);
}

absl::StatusOr<Tensor> PipelineModel::ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                                  const Tensor& targets, float dloss_scale) {
  if (ctx.training) {
    return FailedPrecondition("a pipeline model trained without its step schedule",
                              "the pp strategy's schedule to drive training");
  }
  WEFT_RETURN_IF_ERROR(RefreshStages());
  WEFT_ASSIGN_OR_RETURN(PipeBatch batch, LocalPart(ctx, inputs, targets, dloss_scale));
  Tensor losses;
  for (int c = 0; c < num_chunks(); ++c) {
    WEFT_ASSIGN_OR_RETURN(Tensor out, ForwardChunk(ctx, c, /*micro=*/0, batch));
    if (out.defined()) losses = out;
  }
  WEFT_RETURN_IF_ERROR(links_->WaitSends());
  if (losses.defined()) return losses;
  return ctx.Zeros({1}, DType::kF32);
}

absl::Status PipelineModel::BackwardFromLoss(RunContext&) {
  return FailedPrecondition("a pipeline backward outside its step schedule",
                            "the pp strategy's schedule to drive training");
}

absl::StatusOr<Tensor> PipelineModel::Forward(RunContext&, const Tensor&) {
  return absl::UnimplementedError("a pipeline model has no single-rank forward to predictions");
}

absl::StatusOr<Tensor> PipelineModel::Backward(RunContext&, const Tensor&) {
  return absl::UnimplementedError("a pipeline model has no single-rank backward");
}

namespace {

// BeginAction/EndAction around one timeline action, on every return path.
class ActionScope {
 public:
  ActionScope(MicroBatchRunner& runner, const PipeAction& a, bool with_chunk) : runner_(runner) {
    runner_.BeginAction(a.kind == PipeAction::Kind::kForward ? ScheduleAction::Kind::kForward
                                                             : ScheduleAction::Kind::kBackward,
                        a.ToString(with_chunk));
  }
  ~ActionScope() { runner_.EndAction(); }
  ActionScope(const ActionScope&) = delete;
  ActionScope& operator=(const ActionScope&) = delete;

 private:
  MicroBatchRunner& runner_;
};

// `t` copied into memory of the context's device (not the loader's ring).
absl::StatusOr<Tensor> OwnCopy(const RunContext& ctx, const Tensor& t) {
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty(t.shape(), t.dtype()));
  WEFT_RETURN_IF_ERROR(out.CopyFrom(t, ctx.stream, /*async=*/true));
  return out;
}

}  // namespace

PipelineStepSchedule::PipelineStepSchedule(PipelineModel* model, std::string schedule_name)
    : model_(model), schedule_name_(std::move(schedule_name)) {}

PipelineStepSchedule::Peaks PipelineStepSchedule::TakePeaks() const {
  Peaks p = peaks_;
  peaks_ = {};
  return p;
}

std::vector<ScheduleAction> PipelineStepSchedule::Actions(int num_micro) const {
  std::vector<ScheduleAction> out;
  auto s = MakePipelineSchedule(schedule_name_);
  if (!s.ok()) return out;
  auto t = (*s)->Build({model_->links().size(), model_->num_chunks(), num_micro});
  if (!t.ok()) return out;
  for (const PipeAction& a : (*t)[model_->links().rank()]) {
    if (a.kind == PipeAction::Kind::kWeight) continue;
    out.push_back({a.kind == PipeAction::Kind::kForward ? ScheduleAction::Kind::kForward
                                                        : ScheduleAction::Kind::kBackward,
                   a.micro});
  }
  return out;
}

absl::Status PipelineStepSchedule::Run(
    int num_micro, MicroBatchRunner& runner,
    const std::vector<std::unique_ptr<StepParticipant>>& participants) const {
  WEFT_RETURN_IF_ERROR(model_->RefreshStages());
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<PipelineSchedule> schedule,
                        MakePipelineSchedule(schedule_name_));
  const PipelineShape shape{model_->links().size(), model_->num_chunks(), num_micro};
  WEFT_ASSIGN_OR_RETURN(Timeline timeline, schedule->Build(shape));
  const std::vector<PipeAction>& mine = timeline[model_->links().rank()];
  // Split schedules (zbh1): B computes input gradients and queues the
  // weight-gradient GEMMs in the micro-batch's slot; W runs them.
  // Gradients become final in W then, and data-parallel participants see
  // BeforeBackward before each W, whose queued gradients-ready hooks they
  // run in (module.h); those that reduce in every backward cannot wait.
  const bool split = schedule->SplitsBackward();
  if (split) {
    for (auto& p : participants) {
      if (!p->ReducesEveryBackward()) continue;
      return FailedPrecondition(
          absl::StrCat("--pp_schedule=", schedule_name_,
                       " with a data-parallel strategy that reduces gradients in every backward "
                       "(zero stage 2 or 3, fsdp)"),
          "ddp, zero stage 1, or a pipeline-only mesh with a split-backward schedule",
          "use --strategy=ddp or --zero_stage=1 with zbh1, or --pp_schedule=1f1b with zero-2/3 "
          "and fsdp");
    }
  }
  const PipeAction::Kind last_part = split ? PipeAction::Kind::kWeight : PipeAction::Kind::kBackward;
  size_t last_backward = 0;  // the action in which gradients become final
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i].kind == last_part) last_backward = i;
  }
  std::vector<std::optional<PipeBatch>> batches(num_micro);
  std::vector<int> backwards_done(num_micro, 0);
  int in_flight = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    const PipeAction& a = mine[i];
    RunContext* ctx = runner.Enter(a.micro);
    if (ctx == nullptr) return Internal("a step runner that cannot run a pipeline");
    if (a.kind == PipeAction::Kind::kForward && !batches[a.micro]) {
      WEFT_ASSIGN_OR_RETURN(MicroBatchRunner::MicroBatch mb, runner.Load(a.micro));
      WEFT_ASSIGN_OR_RETURN(PipeBatch batch,
                            model_->LocalPart(*ctx, mb.inputs, mb.targets, mb.dloss_scale));
      // A pipeline holds up to all of a step's micro-batches at once (GPipe),
      // more than the loader's ring has slots: keep copies, free the slot.
      WEFT_ASSIGN_OR_RETURN(batch.part.inputs, OwnCopy(*ctx, batch.part.inputs));
      WEFT_ASSIGN_OR_RETURN(batch.part.targets, OwnCopy(*ctx, batch.part.targets));
      batches[a.micro] = std::move(batch);
    }
    ActionScope scope(runner, a, model_->num_chunks() > 1);
    if (a.kind == PipeAction::Kind::kForward) {
      ctx->dloss_scale = batches[a.micro]->dloss_scale;  // auxiliary losses (MoE) scale by it
      WEFT_ASSIGN_OR_RETURN(Tensor losses,
                            model_->ForwardChunk(*ctx, a.chunk, a.micro, *batches[a.micro]));
      if (losses.defined()) WEFT_RETURN_IF_ERROR(runner.AddLosses(losses));
      if (a.chunk == 0) ++in_flight;
      peaks_.in_flight = std::max(peaks_.in_flight, in_flight);
      peaks_.activation_bytes = std::max(peaks_.activation_bytes, ctx->store().TotalBytes());
    } else if (a.kind == PipeAction::Kind::kBackward) {
      if (!split) {
        for (auto& p : participants) {
          WEFT_RETURN_IF_ERROR(p->BeforeBackward({.micro = a.micro, .last = i == last_backward}));
        }
      }
      ctx->defer_weight_grads = split;
      const absl::Status b = model_->BackwardChunk(*ctx, a.chunk, a.micro, *batches[a.micro]);
      ctx->defer_weight_grads = false;
      WEFT_RETURN_IF_ERROR(b);
    } else {
      for (auto& p : participants) {
        WEFT_RETURN_IF_ERROR(p->BeforeBackward({.micro = a.micro, .last = i == last_backward}));
      }
      WEFT_RETURN_IF_ERROR(ctx->store().RunDeferred(a.micro));
    }
    if (a.kind == last_part && ++backwards_done[a.micro] == model_->num_chunks()) {
      ctx->store().DropSlot(a.micro);
      --in_flight;
    }
  }
  return model_->links().WaitSends();
}

}  // namespace weft::pp
