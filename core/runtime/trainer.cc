#include "core/runtime/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "comm/process_group/op_observer.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"
#include "core/parallel/grad_norm.h"
#include "core/runtime/job_agreement.h"
#include "core/runtime/job_dtypes.h"
#include "core/runtime/parallel_setup.h"
#include "core/runtime/stop_signals.h"

namespace weft {
namespace {


uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

double HostMs(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

// Runs the forwards and backwards the step schedule asks for. Micro-batch m
// keeps its activations in slot m of the context's store between its
// forward and its backward; its batch is pulled (NextTrainBatch) at its
// forward, not all at the step's start: on CPU a batch lends a slot of the
// loader's ring (prefetch_depth + 2 of them), so holding every micro-batch
// of a long accumulation would wait on itself, and a pipeline's first stage
// needs micro-batch m only when its forward comes.
// Under --cuda_graph the captured step reads its batches from the graph's
// static buffers, which RunGraphStep fills before every launch.
class Trainer::StepRunner : public MicroBatchRunner {
 public:
  explicit StepRunner(Trainer& t, bool static_inputs = false)
      : t_(t), static_inputs_(static_inputs) {}

  absl::Status Forward(int micro) override {
    WEFT_ASSIGN_OR_RETURN(MicroBatch mb, Load(micro));
    StepTimer::Scope forward(t_.instruments_->timer(), StepPart::kForward);
    Enter(micro);
    WEFT_ASSIGN_OR_RETURN(Tensor losses,
                          t_.model_->ForwardLoss(t_.ctx_, mb.inputs, mb.targets, mb.dloss_scale));
    return AddLosses(losses);
  }

  absl::StatusOr<MicroBatch> Load(int micro) override {
    const TrainConfig& c = t_.cfg();
    MicroBatch mb;
    if (static_inputs_) {
      mb.inputs = t_.graph_->Input(micro, t_.options_.job->InputField());
      mb.targets = t_.graph_->Input(micro, t_.options_.job->TargetField());
    } else {
      WEFT_ASSIGN_OR_RETURN(data::Batch batch, t_.NextTrainBatch());
      mb.inputs = batch.Get(t_.options_.job->InputField());
      mb.targets = batch.Get(t_.options_.job->TargetField());
    }
    t_.targets_per_sample_ = t_.model_->TargetsPerSample(mb.targets);
    mb.dloss_scale = 1.0f / static_cast<float>(c.global_batch() * t_.targets_per_sample_);
    return mb;
  }

  absl::Status AddLosses(const Tensor& losses) override {
    return t_.ctx_.ops->Sum(t_.ctx_.kernel(), t_.loss_sum_, losses, /*accumulate=*/true);
  }

  absl::Status Backward(int micro) override {
    StepTimer::Scope backward(t_.instruments_->timer(), StepPart::kBackward);
    Enter(micro);
    WEFT_RETURN_IF_ERROR(t_.model_->BackwardFromLoss(t_.ctx_));
    // Whatever a module did not consume (an unused branch) goes too.
    t_.ctx_.store().DropSlot(micro);
    return absl::OkStatus();
  }

  void BeginAction(ScheduleAction::Kind kind, const std::string& label) override {
    action_part_.emplace(t_.instruments_->timer(), kind == ScheduleAction::Kind::kForward
                                                        ? StepPart::kForward
                                                        : StepPart::kBackward);
    action_label_ = label;
    action_begin_us_ = comm::WallMicros();
  }

  void EndAction() override {
    action_part_.reset();
    t_.instruments_->AddPipelineAction(action_label_, action_begin_us_, comm::WallMicros());
  }

 private:
  // The context of micro-batch `micro`: its activation slot and its dropout
  // masks, the same for its forward, recompute and backward. The masks are
  // keyed by the step and each sample's place in the step's global batch.
  // The sampler (data/distributed_sampler.h) gives dp rank r the global
  // batch's samples r, r + W, r + 2W, ... in order, micro-batch after
  // micro-batch, so sample b of micro-batch m is sample r + W (m B + b):
  // the same sample gets the same mask for any dp size and micro-batch.
  RunContext* Enter(int micro) override {
    t_.ctx_.slot = micro;
    t_.ctx_.dropout_seed = t_.StepDropoutSeed();
    const auto dp = static_cast<uint64_t>(t_.parallel_->dp_size);
    t_.ctx_.samples = {
        .first = static_cast<uint64_t>(t_.parallel_->dp_rank) +
                 dp * static_cast<uint64_t>(micro) * static_cast<uint64_t>(t_.cfg().micro_batch()),
        .stride = dp};
    return &t_.ctx_;
  }

  Trainer& t_;
  const bool static_inputs_;
  std::optional<StepTimer::Scope> action_part_;
  std::string action_label_;
  int64_t action_begin_us_ = 0;
};

Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(Options options) {
  if (options.job == nullptr) {
    return InvalidArgument("Trainer options without a job", "Options::job set (train_job.h)");
  }
  std::unique_ptr<Trainer> t(new Trainer(std::move(options)));
  WEFT_RETURN_IF_ERROR(t->Init());
  return t;
}

absl::StatusOr<data::Batch> Trainer::NextTrainBatch() {
  StepTimer::Scope wait(instruments_->timer(), StepPart::kDataWait);
  WEFT_ASSIGN_OR_RETURN(data::Batch batch, loaders_.train->Next());
  WEFT_RETURN_IF_ERROR(batch.WaitOn(compute_stream()));
  return batch;
}

std::string Trainer::JobText() const {
  std::string text = options_.job->Describe();
  return text.empty() ? cfg().DebugString() : text;
}

uint64_t Trainer::StepDropoutSeed() const {
  return MixSeed(static_cast<uint64_t>(cfg().seed()), static_cast<uint64_t>(step_));
}

absl::Status Trainer::IssueStep(StepRunner& runner, float lr) {
  const TrainConfig& c = cfg();
  bool zeroed = false;
  for (auto& p : parallel_->participants) {
    WEFT_RETURN_IF_ERROR(p->ZeroGrad());
    zeroed |= p->ZeroesModelGradients();
  }
  if (!zeroed) WEFT_RETURN_IF_ERROR(ZeroGrads(*model_, ctx_.stream));
  WEFT_RETURN_IF_ERROR(loss_sum_.Zero(ctx_.stream));
  // Issued first, on a group of its own, and waited for at the end: the
  // exchange runs beside the step's compute.
  WEFT_RETURN_IF_ERROR(ShareStopSignal());
  ctx_.training = true;
  WEFT_RETURN_IF_ERROR(step_schedule_->Run(static_cast<int>(accum_steps_), runner,
                                           parallel_->participants));
  {
    StepTimer::Scope finish(instruments_->timer(), StepPart::kBackward);
    for (auto& p : parallel_->participants) WEFT_RETURN_IF_ERROR(p->FinishGradients());
    for (auto& p : parallel_->participants) {
      WEFT_RETURN_IF_ERROR(p->AfterAllGradients(optimizer_->targets()));
    }
  }
  std::optional<StepTimer::Scope> optimizer_part;
  optimizer_part.emplace(instruments_->timer(), StepPart::kOptimizer);
  const float clip = c.optim().grad_clip();
  if (clip > 0) {
    WEFT_RETURN_IF_ERROR(GradNormSquared(*ctx_.ops, ctx_.kernel(), optimizer_->targets(),
                                         parallel_->model_parallel.get(), grad_norm_sq_));
    for (auto& p : parallel_->participants) WEFT_RETURN_IF_ERROR(p->ReduceGradNormSq(grad_norm_sq_));
  }
  WEFT_RETURN_IF_ERROR(optimizer_->Step(ctx_.kernel(), {.lr = lr,
                                                        .step = step_,
                                                        .max_grad_norm = clip,
                                                        .grad_norm_sq = grad_norm_sq_}));
  for (auto& p : parallel_->participants) WEFT_RETURN_IF_ERROR(p->AfterOptimizerStep());
  optimizer_part.reset();
  WEFT_RETURN_IF_ERROR(parallel_->SumLoss(loss_sum_, ctx_.stream));
  return FinishStopSignalShare();
}

absl::Status Trainer::RunGraphStep(float lr) {
  for (int micro = 0; micro < accum_steps_; ++micro) {
    WEFT_ASSIGN_OR_RETURN(data::Batch batch, NextTrainBatch());
    for (const std::string& field : {options_.job->InputField(), options_.job->TargetField()}) {
      WEFT_RETURN_IF_ERROR(graph_->SetInput(micro, field, batch.Get(field)));
    }
  }
  WEFT_RETURN_IF_ERROR(optimizer_->StageStepScalars(lr, step_));
  graph_->StageDropoutSeed(StepDropoutSeed());
  if (!graph_->captured()) {
    StepTimer* timer = instruments_->timer();
    timer->SetRecording(false);
    ctx_.allocator = ctx_.scratch_allocator = graph_->allocator();
    ctx_.dropout_seed_in_memory = graph_->dropout_seed();
    const absl::Status captured = graph_->Capture([&] {
      WEFT_RETURN_IF_ERROR(graph_->CopyDropoutSeed());
      StepRunner runner(*this, /*static_inputs=*/true);
      return IssueStep(runner, lr);
    });
    ctx_.dropout_seed_in_memory = Tensor();
    ctx_.allocator = act_alloc_.get();
    ctx_.scratch_allocator = nullptr;
    timer->SetRecording(true);
    WEFT_RETURN_IF_ERROR(captured);
  }
  return graph_->Launch();
}

absl::StatusOr<StepStats> Trainer::TrainStep() {
  const auto t0 = std::chrono::steady_clock::now();
  ++step_;
  instruments_->BeginStep(step_);
  const TrainConfig& c = cfg();
  const float clip = c.optim().grad_clip();
  const float lr = schedule_->At(step_);
  if (graph_ != nullptr && eager_steps_ >= kEagerStepsBeforeCapture) {
    WEFT_RETURN_IF_ERROR(RunGraphStep(lr));
  } else {
    ++eager_steps_;
    // The warm-up steps of --cuda_graph allocate where the capture will,
    // so it finds that memory cached.
    if (graph_ != nullptr) ctx_.allocator = ctx_.scratch_allocator = graph_->allocator();
    StepRunner runner(*this);
    const absl::Status issued = IssueStep(runner, lr);
    ctx_.allocator = act_alloc_.get();
    ctx_.scratch_allocator = nullptr;
    WEFT_RETURN_IF_ERROR(issued);
  }

  // The one host synchronization of the step.
  const auto t_issued = std::chrono::steady_clock::now();
  instruments_->MarkEnd();
  WEFT_ASSIGN_OR_RETURN(std::vector<float> scalars, step_scalars_.ToFloats());
  const double grad_norm = clip > 0 ? std::sqrt(static_cast<double>(scalars[1])) : 0.0;
  const auto t1 = std::chrono::steady_clock::now();

  StepStats s;
  s.step = step_;
  const double global_targets = static_cast<double>(c.global_batch() * targets_per_sample_);
  s.loss = scalars[0] / global_targets;
  s.lr = lr;
  s.grad_norm = grad_norm;
  if (stop_on_signal_) {
    // One rank reads its own; several read the job's, shared in the step.
    s.stop_signal = stop_group_ != nullptr ? static_cast<int>(scalars[2]) : PendingStopSignal();
  }
  s.step_ms = HostMs(t0, t1);
  s.host_issue_ms = HostMs(t0, t_issued);
  WEFT_ASSIGN_OR_RETURN(const Instruments::StepReport parts, instruments_->EndStep(s.step_ms));
  s.data_wait_ms = parts.parts[StepPart::kDataWait];
  s.forward_ms = parts.parts[StepPart::kForward];
  s.backward_ms = parts.parts[StepPart::kBackward];
  s.exposed_comm_ms = parts.parts[StepPart::kExposedComm];
  s.optimizer_ms = parts.parts[StepPart::kOptimizer];
  s.other_ms = parts.parts[StepPart::kOther];
  s.comm_mb = parts.comm_mb;
  s.tokens_per_s = global_targets / (s.step_ms / 1000.0);
  // MFU needs the device's peak; unknown (CPU without --peak_tflops) is NaN,
  // which the JSON log writes as null rather than a made-up number.
  s.mfu = peak_flops_ > 0
              ? flops_per_target_ * s.tokens_per_s / (peak_flops_ * parallel_->world_size)
              : std::nan("");
  WEFT_ASSIGN_OR_RETURN(Allocator * device_alloc, DefaultAllocator(ctx_.device));
  int64_t peak = device_alloc->Stats().peak_allocated_bytes;
  // The graph's activations live in its own pool: the sum of the two peaks
  // (an upper bound of the peak of the sum).
  if (graph_ != nullptr) peak += graph_->pool().Stats().peak_allocated_bytes;
  s.peak_mem_mb = static_cast<double>(peak) / (1 << 20);
  if (!std::isfinite(s.loss)) {
    return absl::InternalError(absl::StrCat(
        "loss became ", s.loss, " at step ", step_,
        "; expected a finite loss. Hint: lower --lr, enable --grad_clip, or check the data"));
  }
  model_->AppendStepMetrics(&s.extra);
  for (auto& p : parallel_->participants) p->AppendStepMetrics(&s.extra);
  history_.push_back(s);
  return s;
}

absl::StatusOr<std::vector<StatePiece>> Trainer::ExportState() const {
  std::vector<int> coords;
  if (parallel_->mesh != nullptr) {
    coords = parallel_->mesh->layout().Coordinates(parallel_->mesh->rank());
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<StatePiece> pieces, weft::ExportState(*optimizer_, coords));
  for (StatePiece& p : pieces) {
    p.info.replica = p.info.replica * parallel_->replica_copies + parallel_->replica_copy;
  }
  return pieces;
}

}  // namespace weft
