// Trainer::Init and its phases, in the order they run. Each phase builds
// one thing from the config and what the phases before it built.
#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"
#include "core/runtime/flight_dump.h"
#include "core/runtime/job_agreement.h"
#include "core/runtime/job_dtypes.h"
#include "core/runtime/parallel_setup.h"
#include "core/runtime/stop_signals.h"
#include "core/runtime/trainer.h"

#include <cmath>

namespace weft {
namespace {

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

}  // namespace

absl::Status Trainer::Init() {
  WEFT_RETURN_IF_ERROR(CheckConfig());
  WEFT_RETURN_IF_ERROR(InitDevice());
  WEFT_RETURN_IF_ERROR(InitParallelPlan());
  WEFT_RETURN_IF_ERROR(InitData());
  WEFT_RETURN_IF_ERROR(InitModel());
  WEFT_RETURN_IF_ERROR(InitOptimizer());
  WEFT_RETURN_IF_ERROR(InitStopGroup());
  WEFT_RETURN_IF_ERROR(InitResumeAndLog());
  WEFT_RETURN_IF_ERROR(InitStepSchedule());
  LogStartup();
  if (cfg().cuda_graph()) WEFT_RETURN_IF_ERROR(InitStepGraph());
  instruments_->StartGpuSampling();
  return InitCheckpointing();
}

// Values that no later phase could give a clearer error for.
namespace {
constexpr int kMaxCpuThreads = 1024;
}  // namespace

absl::Status Trainer::CheckConfig() const {
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
  // -2 was taken silently; a huge count aborted creating threads.
  if (c.cpu_threads() < 0 || c.cpu_threads() > kMaxCpuThreads) {
    return InvalidArgument(absl::StrCat("--cpu_threads=", c.cpu_threads()),
                           absl::StrCat("0 (OpenBLAS's default) to ", kMaxCpuThreads),
                           "about one thread per core; ranks on one machine share them");
  }
  const auto in_unit = [](double b) { return b >= 0 && b < 1; };  // NaN fails
  if (!in_unit(c.optim().beta1()) || !in_unit(c.optim().beta2())) {
    return InvalidArgument(
        absl::StrCat("--beta1=", c.optim().beta1(), " --beta2=", c.optim().beta2()),
        "both in [0, 1): Adam's moment decay rates", "the usual are 0.9 and 0.95 (or 0.999)");
  }
  if (!(c.optim().eps() > 0) || !std::isfinite(c.optim().eps())) {
    return InvalidArgument(absl::StrCat("--eps=", c.optim().eps()), "a finite eps > 0");
  }
  // NaN passed the > 0 checks downstream and made every wait endless.
  if (!std::isfinite(c.parallel().timeout_s()) || !(c.parallel().timeout_s() > 0)) {
    return InvalidArgument(absl::StrCat("--timeout_s=", c.parallel().timeout_s()),
                           "a finite number of seconds > 0",
                           "the default 300 suits most jobs; raise it for slow first steps");
  }
  return absl::OkStatus();
}

// Stop signals, where this process sits, its device and stream, the
// allocators by category, and the instruments (tracing, progress).
absl::Status Trainer::InitDevice() {
  const TrainConfig& c = cfg();
  // Before anything starts a thread (the store client, data workers), so
  // they all inherit the blocked stop signals.
  stop_on_signal_ = c.save_on_signal() && !c.checkpoint_dir().empty();
  if (stop_on_signal_) WEFT_RETURN_IF_ERROR(InstallStopSignals());
  WEFT_ASSIGN_OR_RETURN(topology_, ResolveTopology(options_.topology));
  // Before the first collective. SIGTERM is the stop signals' when they are on.
  WEFT_RETURN_IF_ERROR(StartFlightRecorder(c.parallel(), topology_.rank, topology_.world_size,
                                           /*own_signals=*/!stop_on_signal_ &&
                                               topology_.world_size > 1));
  WEFT_RETURN_IF_ERROR(ResolveDevice(topology_));
  WEFT_ASSIGN_OR_RETURN(Allocator * device_alloc, DefaultAllocator(ctx_.device));
  param_alloc_ = std::make_unique<TrackingAllocator>("parameters", device_alloc);
  grad_alloc_ = std::make_unique<TrackingAllocator>("gradients", device_alloc);
  optim_alloc_ = std::make_unique<TrackingAllocator>("optimizer-state", device_alloc);
  act_alloc_ = std::make_unique<TrackingAllocator>("activations", device_alloc);
  ctx_.allocator = act_alloc_.get();
  WEFT_ASSIGN_OR_RETURN(grad_dtype_, GradDTypeOn(c, ctx_.device));
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
  return absl::OkStatus();
}

// The one parallel plan, then the store, the mesh and this rank's
// data-parallel coordinates, and from them the accumulation steps.
absl::Status Trainer::InitParallelPlan() {
  const TrainConfig& c = cfg();
  WEFT_ASSIGN_OR_RETURN(ParallelPlan plan, ResolvePlan(c, topology_));
  plan_.emplace(std::move(plan));
  WEFT_ASSIGN_OR_RETURN(parallel_,
                        InitParallel(*plan_, c.parallel(), topology_, ctx_.device,
                                     instruments_->comm_observer(),
                                     JobText()));
  const int64_t per_step = c.micro_batch() * parallel_->dp_size;
  if (c.global_batch() % per_step != 0) {
    return InvalidArgument(
        absl::StrCat("global_batch=", c.global_batch(), " is not divisible by micro_batch=",
                     c.micro_batch(), " x data-parallel ranks=", parallel_->dp_size),
        "global_batch a multiple of micro_batch * dp ranks",
        BatchHint(c.global_batch(), c.micro_batch(), parallel_->dp_size));
  }
  accum_steps_ = c.global_batch() / per_step;
  return absl::OkStatus();
}

// This rank's loaders, checked to hold the same data as rank 0's.
absl::Status Trainer::InitData() {
  const TrainConfig& c = cfg();
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
  WEFT_ASSIGN_OR_RETURN(loaders_, options_.job->OpenData(base));
  if (loaders_.train == nullptr) return Internal("the job's OpenData returned no training loader");
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
  return absl::OkStatus();
}

namespace {

// /proc/meminfo's MemAvailable in bytes, or -1 when it cannot be read.
int64_t HostMemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

// Every rank materializes the whole model before its strategies shard it:
// one that cannot fit this host's memory is refused before it allocates
// (--n_layer=100000 used to run out of memory minutes later, without a word).
absl::Status CheckModelFitsHost(Module& model, DType param_dtype, DType grad_dtype) {
  int64_t elements = 0;
  for (Parameter* p : model.Parameters()) elements += NumElements(p->shape());
  const int64_t bytes =
      elements * static_cast<int64_t>(DTypeSize(param_dtype) + DTypeSize(grad_dtype));
  int local = 1;
  if (const char* l = std::getenv("LOCAL_WORLD_SIZE"); l != nullptr) local = std::max(1, std::atoi(l));
  const int64_t available = HostMemAvailable();
  if (available < 0 || bytes * local <= available) return absl::OkStatus();
  return FailedPrecondition(
      absl::StrFormat("the model's %.3g B parameters need %.1f GB (values and gradients, before "
                      "any strategy shards them) on each of this host's %d rank(s), %.1f GB in "
                      "all; the host has %.1f GB available",
                      elements / 1e9, bytes / 1e9, local, bytes * local / 1e9, available / 1e9),
      "a model whose whole parameters fit on each rank of the host",
      "check --n_layer and --d_model; //tools:estimate --config=... says what a layout needs");
}

}  // namespace

// The model, its parameters materialized, then the plan's strategies.
absl::Status Trainer::InitModel() {
  WEFT_ASSIGN_OR_RETURN(model_, options_.job->MakeModel(loaders_));
  if (ctx_.device.is_cpu()) {
    WEFT_RETURN_IF_ERROR(CheckModelFitsHost(*model_, ctx_.compute_dtype, grad_dtype_));
  }
  WEFT_RETURN_IF_ERROR(MaterializeParameters(
      *model_, {.device = ctx_.device,
                .param_dtype = ctx_.compute_dtype,
                .grad_dtype = grad_dtype_,
                .seed = static_cast<uint64_t>(cfg().seed()),
                .allocator = param_alloc_.get(),
                .grad_allocator = grad_alloc_.get(),
                .stream = ctx_.stream}));
  return ApplyStrategies(*plan_, model_, ctx_, param_alloc_.get(), grad_alloc_.get(),
                         grad_dtype_, *parallel_);
}

// What this rank updates (a strategy's re-placed shards, or the model's
// parameters), the optimizer over it, the LR schedule, and the step's
// device scalars.
absl::Status Trainer::InitOptimizer() {
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
  const TrainConfig& c = cfg();
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
  return absl::OkStatus();
}

std::string Trainer::LrScheduleText() const {
  const OptimConfig& o = cfg().optim();
  return absl::StrCat(o.lr_schedule(), " ", o.lr(), " -> ", o.min_lr(), ", warmup ",
                      o.warmup_steps(), ", over ", cfg().steps(), " steps");
}

// --resume's checkpoint, read once (its step is where the metrics file
// continues, and InitCheckpointing loads it), then the metrics logger.
absl::Status Trainer::InitResumeAndLog() {
  const TrainConfig& c = cfg();
  if (!c.resume().empty()) {
    WEFT_ASSIGN_OR_RETURN(std::string dir, ckpt::ResolveResume(c.checkpoint_dir(), c.resume()));
    if (dir.empty()) {  // --resume=auto before the first save
      startup_notes_.push_back(absl::StrCat("--resume=auto: no checkpoint under ",
                                            c.checkpoint_dir(), " yet, a new run from step 0"));
    } else {
      WEFT_ASSIGN_OR_RETURN(resume_from_, ckpt::OpenCheckpoint(dir));
      WEFT_RETURN_IF_ERROR(options_.job->CheckResumed(resume_from_->meta));
      const std::string& saved = resume_from_->meta.lr_schedule();
      if (!saved.empty() && saved != LrScheduleText()) {
        startup_notes_.push_back(absl::StrCat(
            "the learning-rate schedule differs from the checkpoint's: it was ", saved,
            ", it is now ", LrScheduleText(), "; from step ", resume_from_->meta.step() + 1,
            " the LR follows the new one (keep --steps and the optim flags to continue the "
            "old curve)"));
      }
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
  return absl::OkStatus();
}

// The order of each step's forwards and backwards: a strategy's own (a
// pipeline's), the job's (Options::schedule), or --step_schedule.
absl::Status Trainer::InitStepSchedule() {
  const TrainConfig& c = cfg();
  // Setup copies (materialized tensors before strategies re-placed them)
  // are gone: peaks from here on describe training.
  for (TrackingAllocator* a :
       {param_alloc_.get(), grad_alloc_.get(), optim_alloc_.get(), act_alloc_.get()}) {
    a->ResetPeak();
  }
  if (parallel_->step_schedule != nullptr) {
    if (c.step_schedule() != "grad_accum") {
      return InvalidArgument(absl::StrCat("--step_schedule=", c.step_schedule(), " with strategy ",
                                          absl::StrJoin(parallel_->strategy_names, ",")),
                             "the strategy's own schedule (e.g. --pp_schedule for pp)");
    }
    step_schedule_ = parallel_->step_schedule;
  } else {
    WEFT_ASSIGN_OR_RETURN(step_schedule_, MakeStepSchedule(c.step_schedule(), accum_steps_));
  }
  return absl::OkStatus();
}

// The banner, the strategies' and the trainer's notes, and the config.
void Trainer::LogStartup() {
  const TrainConfig& c = cfg();
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

}  // namespace weft
