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

// --step_schedule: a name, or a fixed order over the step's micro-batches.
absl::StatusOr<std::shared_ptr<const StepSchedule>> MakeStepSchedule(const std::string& spec,
                                                                     int64_t accum_steps) {
  if (spec == "grad_accum" || spec.empty()) return std::make_shared<GradAccumSchedule>();
  absl::StatusOr<std::unique_ptr<FixedOrderSchedule>> fixed = FixedOrderSchedule::Parse(spec);
  if (!fixed.ok()) {
    return InvalidArgument(absl::StrCat("--step_schedule=", spec),
                           "grad_accum or an order such as \"F0 F1 B1 B0\"",
                           std::string(fixed.status().message()));
  }
  absl::Status fits = ValidateActions((*fixed)->Actions(0), static_cast<int>(accum_steps));
  if (!fits.ok()) {
    return InvalidArgument(absl::StrCat("--step_schedule=", spec),
                           absl::StrCat("an order over exactly ", accum_steps,
                                        " accumulation steps (global_batch / (micro_batch x dp))"),
                           std::string(fits.message()));
  }
  return std::shared_ptr<const StepSchedule>(std::move(*fixed));
}

// Suggests the nearest valid settings for a batch that does not divide.
std::string BatchHint(int64_t global, int64_t micro, int64_t dp) {
  std::string hint = absl::StrCat("try --global_batch=", micro * dp * std::max<int64_t>(1, global / (micro * dp)));
  if (global % dp == 0) {
    int64_t m = std::min(micro, global / dp);
    while ((global / dp) % m != 0) --m;
    absl::StrAppend(&hint, " or --micro_batch=", m);
  }
  return hint;
}

double HostMs(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

// Runs the forwards and backwards the step schedule asks for. Micro-batch m
// keeps its activations in slot m of the context's store between its
// forward and its backward; its batch is loaded at its forward.
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
      mb.inputs = t_.graph_->Input(micro, t_.options_.input_field);
      mb.targets = t_.graph_->Input(micro, t_.options_.target_field);
    } else {
      // Batches come in micro-batch order.
      data::Batch batch;
      {
        StepTimer::Scope wait(t_.instruments_->timer(), StepPart::kDataWait);
        WEFT_ASSIGN_OR_RETURN(batch, t_.loaders_.train->Next());
        WEFT_RETURN_IF_ERROR(batch.WaitOn(t_.compute_stream()));
      }
      mb.inputs = batch.Get(t_.options_.input_field);
      mb.targets = batch.Get(t_.options_.target_field);
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
  if (!options.make_model || !options.open_data) {
    return InvalidArgument("Trainer options without make_model or open_data", "both set");
  }
  std::unique_ptr<Trainer> t(new Trainer(std::move(options)));
  WEFT_RETURN_IF_ERROR(t->Init());
  return t;
}

absl::Status Trainer::ResolveDevice(const JobTopology& topology) {
  WEFT_ASSIGN_OR_RETURN(Device device, ParseDevice(cfg().device()));
  // "cuda" without an index means this rank's local GPU.
  if (device.is_cuda() && cfg().device() == "cuda") device = Device::Cuda(topology.local_rank);
  WEFT_ASSIGN_OR_RETURN(const DType compute, ComputeDTypeOn(cfg(), device));
  if (device.is_cuda()) {
    WEFT_ASSIGN_OR_RETURN(Stream s, Stream::Create(device));
    stream_.emplace(std::move(s));
  }
  WEFT_ASSIGN_OR_RETURN(ctx_, RunContext::Create(device, compute,
                                                 stream_ ? stream_->native() : nullptr));
  if (cfg().cpu_threads() > 0) {
    WEFT_ASSIGN_OR_RETURN(KernelOps * cpu_ops, GetKernelOps(DeviceType::kCPU));
    cpu_ops->SetNumThreads(cfg().cpu_threads());
  }
  return absl::OkStatus();
}

absl::Status Trainer::Init() {
  const TrainConfig& c = cfg();
  if (c.steps() < 1) return InvalidArgument(absl::StrCat("steps=", c.steps()), "steps >= 1");
  if (c.global_batch() < 1 || c.micro_batch() < 1) {
    return InvalidArgument(
        absl::StrCat("global_batch=", c.global_batch(), " micro_batch=", c.micro_batch()),
        "both >= 1");
  }
  if (!(c.optim().grad_clip() >= 0)) {  // NaN too
    return InvalidArgument(absl::StrCat("--grad_clip=", c.optim().grad_clip()),
                           "a global norm > 0, or 0 for no clipping");
  }
  // A negative period would silently mean "never".
  if (c.log_every() < 0 || c.eval_every() < 0) {
    return InvalidArgument(
        absl::StrCat("--log_every=", c.log_every(), " --eval_every=", c.eval_every()),
        "both >= 0", "0 turns per-step lines off (--log_every) or evaluates only at the end");
  }
  if (c.eval_batches() < 0 || c.eval_samples() < 0) {
    return InvalidArgument(
        absl::StrCat("eval_batches=", c.eval_batches(), " eval_samples=", c.eval_samples()),
        "both >= 0", "--eval_batches=0 turns evaluation off");
  }
  // Before anything starts a thread (the store client, data workers), so
  // they all inherit the blocked stop signals.
  stop_on_signal_ = c.save_on_signal() && !c.checkpoint_dir().empty();
  if (stop_on_signal_) WEFT_RETURN_IF_ERROR(InstallStopSignals());
  WEFT_ASSIGN_OR_RETURN(topology_, ResolveTopology(options_.topology));
  WEFT_RETURN_IF_ERROR(ResolveDevice(topology_));
  WEFT_ASSIGN_OR_RETURN(Allocator * device_alloc, DefaultAllocator(ctx_.device));
  param_alloc_ = std::make_unique<TrackingAllocator>("parameters", device_alloc);
  grad_alloc_ = std::make_unique<TrackingAllocator>("gradients", device_alloc);
  optim_alloc_ = std::make_unique<TrackingAllocator>("optimizer-state", device_alloc);
  act_alloc_ = std::make_unique<TrackingAllocator>("activations", device_alloc);
  ctx_.allocator = act_alloc_.get();
  WEFT_ASSIGN_OR_RETURN(grad_dtype_, GradDTypeOn(c, ctx_.device));
  const DType grad_dtype = grad_dtype_;
  WEFT_ASSIGN_OR_RETURN(StepRange trace_steps, ParseStepRange(c.trace_steps()));
  if (!c.trace_dir().empty() && trace_steps.first > c.steps()) {
    // Found out at the end, it costs a run: refuse before it starts.
    const int64_t first = std::max<int64_t>(1, c.steps() - 2);
    return InvalidArgument(
        absl::StrCat("--trace_steps=", c.trace_steps(), " with --trace_dir and --steps=",
                     c.steps(), ": the window starts after the last step"),
        "trace steps within the run's steps 1-" + std::to_string(c.steps()),
        absl::StrCat("e.g. --trace_steps=", first, ":", c.steps()));
  }
  instruments_ = std::make_unique<Instruments>(Instruments::Options{
      .rank = topology_.rank,
      .world_size = topology_.world_size,
      .stream = &compute_stream(),
      .total_steps = c.steps(),
      .trace_dir = c.trace_dir(),
      .trace_steps = trace_steps,
      .gpu_sample_s = c.gpu_sample_s(),
      .progress =
          Progress::PickMode(topology_.rank == 0, Progress::StdoutIsTerminal(), c.quiet())});
  WEFT_ASSIGN_OR_RETURN(parallel_,
                        InitParallel(c, topology_, ctx_.device, instruments_->comm_observer(),
                                     options_.describe_job ? options_.describe_job()
                                                           : c.DebugString()));
  const int64_t per_step = c.micro_batch() * parallel_->dp_size;
  if (c.global_batch() % per_step != 0) {
    return InvalidArgument(
        absl::StrCat("global_batch=", c.global_batch(), " is not divisible by micro_batch=",
                     c.micro_batch(), " x data-parallel ranks=", parallel_->dp_size),
        "global_batch a multiple of micro_batch * dp ranks",
        BatchHint(c.global_batch(), c.micro_batch(), parallel_->dp_size));
  }
  accum_steps_ = c.global_batch() / per_step;

  data::DataLoader::Options base;
  base.batch_size = c.micro_batch();
  base.rank = parallel_->dp_rank;
  base.world_size = parallel_->dp_size;
  // Epochs end on the same samples for every dp_size and micro_batch.
  base.global_batch = c.global_batch();
  base.seed = static_cast<uint64_t>(c.seed());
  base.device = ctx_.device;
  base.num_workers = c.data().num_workers();
  base.prefetch_depth = c.data().prefetch_depth();
  base.shuffle = c.data().shuffle();
  base.on_assembled = instruments_->loader_hook();
  WEFT_ASSIGN_OR_RETURN(loaders_, options_.open_data(base));
  if (loaders_.train == nullptr) return Internal("open_data returned no training loader");
  // Each rank takes its share of one sample order: that needs the same data
  // everywhere (a per-node copy that differs would train other token ids).
  if (parallel_->world_size > 1 && topology_.store != nullptr && !ctx_.device.is_meta()) {
    WEFT_ASSIGN_OR_RETURN(
        const std::string data_text,
        DataAgreementText(loaders_.tokenizer, loaders_.vocab_size, loaders_.train->dataset(),
                          loaders_.val ? &loaders_.val->dataset() : nullptr));
    WEFT_RETURN_IF_ERROR(CheckSameAsRankZero(*topology_.store, DataRound(),
                                             parallel_->world_rank, parallel_->world_size,
                                             data_text, absl::Seconds(c.parallel().timeout_s())));
  }
  if (loaders_.val != nullptr) val_start_ = loaders_.val->State();
  if (loaders_.val == nullptr && c.eval_every() > 0 && EvalSamples() > 0) {
    // Evaluations it cannot make (a config's eval_every over data without
    // a validation split): said at startup, not skipped without a word.
    startup_notes_.push_back(absl::StrCat(
        "no validation data: --eval_every=", c.eval_every(),
        " evaluates nothing (set --val_fraction > 0 or provide val shards)"));
  }
  WEFT_ASSIGN_OR_RETURN(model_, options_.make_model(loaders_));

  WEFT_RETURN_IF_ERROR(MaterializeParameters(
      *model_, {.device = ctx_.device,
                .param_dtype = ctx_.compute_dtype,
                .grad_dtype = grad_dtype,
                .seed = static_cast<uint64_t>(c.seed()),
                .allocator = param_alloc_.get(),
                .grad_allocator = grad_alloc_.get(),
                .stream = ctx_.stream}));
  WEFT_RETURN_IF_ERROR(
      ApplyStrategies(c, model_, ctx_, param_alloc_.get(), grad_alloc_.get(), grad_dtype,
                      *parallel_));

  std::vector<OptimTarget> targets;
  bool replaced = false;
  for (auto& p : parallel_->participants) {
    if (auto t = p->OptimizerTargets()) {
      if (replaced) {
        return FailedPrecondition("two strategies both re-place the optimizer's parameters",
                                  "at most one of zero/fsdp in --strategy");
      }
      targets = std::move(*t);
      replaced = true;
    }
  }
  if (!replaced) {
    for (Parameter* p : model_->Parameters()) {
      // Every data-parallel rank holds the whole parameter: replica dp_rank;
      // one sharded over dp_shard in n consecutive-rank blocks (experts
      // under --ep=n) has dp_size / n holders: replica dp_rank / n.
      int replica = parallel_->dp_rank;
      for (const AxisPlacement& a : p->placement().axes()) {
        if (a.kind == AxisPlacement::Kind::kShard && a.axis == "dp_shard") replica /= a.count;
      }
      targets.push_back({p->name(), p->value, p->grad, p->weight_decay(), p, 0, replica});
    }
  }
  const OptimConfig& o = c.optim();
  WEFT_ASSIGN_OR_RETURN(optimizer_, Optimizer::Create({.name = o.name(),
                                                       .beta1 = o.beta1(),
                                                       .beta2 = o.beta2(),
                                                       .eps = o.eps(),
                                                       .weight_decay = o.weight_decay(),
                                                       .momentum = o.momentum(),
                                                       .nesterov = o.nesterov()},
                                                      std::move(targets), ctx_.device,
                                                      optim_alloc_.get(), ctx_.stream));
  WEFT_ASSIGN_OR_RETURN(LrSchedule sched, LrSchedule::Create(o.lr(), o.min_lr(), o.warmup_steps(),
                                                             c.steps(), o.lr_schedule()));
  schedule_.emplace(sched);
  // Loss sum, squared gradient norm and the stop signal side by side, so
  // the step's one host read fetches them all.
  WEFT_ASSIGN_OR_RETURN(step_scalars_, ctx_.Zeros({3}, DType::kF32));
  loss_sum_ = step_scalars_.Slice(0, 0, 1);
  grad_norm_sq_ = step_scalars_.Slice(0, 1, 2);
  stop_signal_ = step_scalars_.Slice(0, 2, 3);
  WEFT_RETURN_IF_ERROR(InitStopGroup());
  // --resume's checkpoint, read once: its step is where the metrics file
  // continues, and InitCheckpointing loads it.
  if (!c.resume().empty()) {
    WEFT_ASSIGN_OR_RETURN(std::string dir, ckpt::ResolveResume(c.checkpoint_dir(), c.resume()));
    if (dir.empty()) {  // --resume=auto before the first save
      startup_notes_.push_back(absl::StrCat("--resume=auto: no checkpoint under ",
                                            c.checkpoint_dir(), " yet, a new run from step 0"));
    } else {
      WEFT_ASSIGN_OR_RETURN(resume_from_, ckpt::OpenCheckpoint(dir));
      if (options_.check_resumed) WEFT_RETURN_IF_ERROR(options_.check_resumed(resume_from_->meta));
    }
  }
  const int64_t resumed_at = resume_from_ ? resume_from_->meta.step() : -1;
  // --quiet drops only the per-step lines (trainer_run.cc): evaluations,
  // checkpoints and notes still print. Dry runs (meta) print nothing.
  WEFT_ASSIGN_OR_RETURN(MetricsLogger logger,
                        MetricsLogger::Open(c.metrics_out(), /*console=*/!ctx_.device.is_meta(),
                                            /*enabled=*/parallel_->world_rank == 0, resumed_at));
  logger_.emplace(std::move(logger));
  instruments_->set_logger(&*logger_);
  // A progress bar owns the terminal's last line: console lines go above it.
  if (instruments_->progress().mode() == Progress::Mode::kBar) {
    logger_->set_console_sink(
        [p = &instruments_->progress()](const std::string& line) { p->Message(line); });
  }

  // Setup copies (materialized tensors before strategies re-placed them)
  // are gone: peaks from here on describe training.
  for (TrackingAllocator* a :
       {param_alloc_.get(), grad_alloc_.get(), optim_alloc_.get(), act_alloc_.get()}) {
    a->ResetPeak();
  }
  step_schedule_ = options_.schedule;
  if (parallel_->step_schedule != nullptr) {
    if (step_schedule_ != nullptr || c.step_schedule() != "grad_accum") {
      return InvalidArgument(absl::StrCat("--step_schedule=", c.step_schedule(), " with strategy ",
                                          absl::StrJoin(parallel_->strategy_names, ",")),
                             "the strategy's own schedule (e.g. --pp_schedule for pp)");
    }
    step_schedule_ = parallel_->step_schedule;
  }
  if (step_schedule_ == nullptr) {
    WEFT_ASSIGN_OR_RETURN(step_schedule_, MakeStepSchedule(c.step_schedule(), accum_steps_));
  }
  flops_per_target_ = model_->TrainingFlopsPerTarget();
  peak_flops_ = c.peak_tflops() > 0 ? c.peak_tflops() * 1e12
                                    : (ctx_.device.is_cuda() ? 989e12 : 0.0);
  int64_t n_params = 0;
  for (Parameter* p : model_->Parameters()) n_params += p->global_numel();
  logger_->Print(absl::StrFormat(
      "weft: %s | %d parameters | device %s | dtype %s | world %d (dp %d) via %s | strategy %s | "
      "global_batch %d = micro_batch %d x dp %d x accum %d",
      model_->Summary(), n_params, ctx_.device.ToString(), DTypeName(ctx_.compute_dtype),
      parallel_->world_size, parallel_->dp_size, topology_.launcher,
      parallel_->strategy_names.empty() ? "none" : absl::StrJoin(parallel_->strategy_names, ","),
      c.global_batch(), c.micro_batch(), parallel_->dp_size, accum_steps_));
  std::vector<std::string> notes = parallel_->notes;
  notes.insert(notes.end(), startup_notes_.begin(), startup_notes_.end());
  for (const std::string& note : notes) {
    logger_->Print(note);
    logger_->Log(MetricsLogger::Record().AddString("note", note), /*to_console=*/false);
  }
  logger_->Log(MetricsLogger::Record().AddString("config", c.ShortDebugString()),
               /*to_console=*/false);
  if (c.cuda_graph()) WEFT_RETURN_IF_ERROR(InitStepGraph());
  instruments_->StartGpuSampling();
  return InitCheckpointing();
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
  if (parallel_->dp_sum) WEFT_RETURN_IF_ERROR(parallel_->dp_sum(loss_sum_, ctx_.stream));
  return FinishStopSignalShare();
}

absl::Status Trainer::RunGraphStep(float lr) {
  for (int micro = 0; micro < accum_steps_; ++micro) {
    data::Batch batch;
    {
      StepTimer::Scope wait(instruments_->timer(), StepPart::kDataWait);
      WEFT_ASSIGN_OR_RETURN(batch, loaders_.train->Next());
      WEFT_RETURN_IF_ERROR(batch.WaitOn(compute_stream()));
    }
    for (const std::string& field : {options_.input_field, options_.target_field}) {
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
