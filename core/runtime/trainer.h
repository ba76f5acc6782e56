// Trainer: the training loop shared by every training target.
//
// One optimizer step = global_batch sequences = micro_batch sequences per
// rank per forward x data-parallel ranks x accumulation steps, so
//   accum_steps = global_batch / (micro_batch * dp_size)
// and changing dp_size or micro_batch does not change the math beyond f32
// summation order: the loss is the mean over the global batch (every
// backward is scaled by 1 / global targets), the data sampler gives each
// step the same global set of samples for any dp_size, and dropout masks
// are keyed by (step, the sample's place in the global batch), not by rank
// or micro-batch (RunContext::samples).
//
// The micro-batches of a step run in the order of a StepSchedule
// (core/parallel/step_schedule.h): gradient accumulation by default.
//
// Each step logs step, loss, lr, step_ms, tokens_per_s, MFU and peak memory
// (console and JSON lines). The host synchronizes once per step, to read the
// loss after the optimizer update; the step itself is stream-ordered.
#ifndef WEFT_CORE_RUNTIME_TRAINER_H_
#define WEFT_CORE_RUNTIME_TRAINER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/dir_lock.h"
#include "checkpoint/host_tensor.h"
#include "checkpoint/loader.h"
#include "core/nn/model.h"
#include "core/optim/lr_schedule.h"
#include "core/optim/optimizer.h"
#include "core/parallel/parallel_plan.h"
#include "core/parallel/parallel_state.h"
#include "core/parallel/sharding_export.h"
#include "core/parallel/step_schedule.h"
#include "core/runtime/instruments.h"
#include "core/runtime/metrics.h"
#include "core/runtime/parallel_setup.h"
#include "core/runtime/step_graph.h"
#include "core/runtime/train_job.h"
#include "core/runtime/train_config.pb.h"
#include "core/tensor/stream.h"
#include "core/tensor/tracking_allocator.h"
#include "data/data_loader.h"

namespace weft {

struct StepStats {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;  // before clipping; 0 when clipping is off
  double step_ms = 0;
  double tokens_per_s = 0;
  double mfu = 0;        // fraction of peak; NaN when the peak is unknown
  double peak_mem_mb = 0;
  // The step's parts (step_timer.h); they add up to step_ms. On CUDA they
  // are device time between the parts' events, so data_wait_ms and
  // exposed_comm_ms count only what the compute stream waited for.
  double data_wait_ms = 0;
  double forward_ms = 0;
  double backward_ms = 0;
  double exposed_comm_ms = 0;
  double optimizer_ms = 0;
  double other_ms = 0;
  double comm_mb = 0;  // payload of the collectives this rank waited on
  // Host time from the step's start to its one synchronization: the time to
  // enqueue the step. Close to step_ms means the device waits on the host.
  double host_issue_ms = 0;
  // SIGTERM or SIGUSR1 that some rank received before this step's end
  // (--save_on_signal), the same on every rank; 0: none.
  int stop_signal = 0;
  // Strategy-specific numbers (e.g. ddp_wait_ms).
  std::vector<std::pair<std::string, double>> extra;
};

class Trainer {
 public:
  struct Options {
    TrainConfig config;
    // What the model family supplies: its data, its model, how the job is
    // recorded and what runs after each step (train_job.h). Required.
    std::shared_ptr<TrainJob> job;
    // Where this process sits in the job; read from the environment when
    // unset (tests inject ranks and a shared store here).
    std::optional<JobTopology> topology;
    // Test hook: called at named points of every checkpoint save (see
    // checkpoint/checkpointer.h); the crash test kills the process there.
    std::function<void(absl::string_view point)> checkpoint_fault_point;
  };

  static absl::StatusOr<std::unique_ptr<Trainer>> Create(Options options);
  ~Trainer();

  // The whole job: config.steps optimizer steps with logging and evaluation.
  // A stop signal (--save_on_signal) ends it early after a checkpoint; it
  // returns OK then, with StoppedBySignal() (stop_signals.h) set.
  absl::Status Run();
  // One optimizer step.
  absl::StatusOr<StepStats> TrainStep();
  // Mean loss over the first `samples` validation samples of the one-process
  // order, the same ones at every call (the loader restarts at its first
  // batch) and for any layout: data-parallel rank r of dp evaluates samples
  // r, r + dp, ... (data/distributed_sampler.h) in batches of micro_batch,
  // every rank as many, with the rows past `samples` ignored. At most the
  // whole validation split.
  absl::StatusOr<double> Evaluate(int64_t samples);
  // The configured evaluation's size: eval_samples, or eval_batches x
  // micro_batch when it is 0 (a resume keeps its checkpoint's count then).
  // 0: no evaluation.
  int64_t EvalSamples() const;

  const std::vector<StepStats>& history() const { return history_; }
  RunContext& context() { return ctx_; }
  // The stream the model computes on (a host "stream" on CPU): batches from
  // the loaders must WaitOn it.
  const Stream& compute_stream() const { return stream_ ? *stream_ : host_stream_; }
  Model& model() { return *model_; }
  data::DataLoader* train_loader() { return loaders_.train.get(); }
  ParallelState& parallel() { return *parallel_; }
  data::DataLoader* val_loader() { return loaders_.val.get(); }
  int64_t accum_steps() const { return accum_steps_; }
  // Memory on this rank by category (exact allocator stats): model state,
  // and what the forward and backward allocate through the run context
  // (saved activations, their gradients, logits and other layer outputs).
  // Strategies' own buffers that belong to none of these (e.g. gradients
  // cast for a reduction) show only in the device allocator's total.
  struct MemoryStats {
    AllocatorStats params, grads, optimizer, activations;
  };
  // Under --cuda_graph the training steps' activations come from the
  // graph's own allocator (step_graph.h) and are counted there.
  MemoryStats ModelMemory() const {
    return {param_alloc_->Stats(), grad_alloc_->Stats(), optim_alloc_->Stats(),
            graph_ != nullptr ? graph_->allocator()->Stats() : act_alloc_->Stats()};
  }
  MetricsLogger& logger() { return *logger_; }
  const TrainConfig& config() const { return options_.config; }
  // Text jobs: the serialized tokenizer of the training data (empty else).
  const std::string& tokenizer() const { return loaders_.tokenizer; }
  // Where this rank's model and optimizer state lives (sharding_export.h).
  absl::StatusOr<std::vector<StatePiece>> ExportState() const;

  // Checkpoints (checkpoint/): every rank calls these at the same step.
  // Saves the state after the current step into --checkpoint_dir.
  absl::Status SaveCheckpoint();
  // Waits for an async save in flight and returns its outcome.
  absl::Status FinishCheckpoints();
  // The metadata of the checkpoint this trainer resumed from; null if none.
  const ckpt::Metadata* resumed_from() const { return resume_from_ ? &resume_from_->meta : nullptr; }
  // Sets parameters from full tensors by name (a foreign format such as
  // llm.c's); optimizer state stays fresh. Names this model lacks are an
  // error; parameters missing from `full` keep their initialization and are
  // returned.
  absl::StatusOr<std::vector<std::string>> LoadWeights(
      const std::map<std::string, ckpt::HostTensor>& full);
  int64_t step() const { return step_; }

 private:
  explicit Trainer(Options options) : options_(std::move(options)) {}
  // Init runs these phases in order (trainer_init.cc); each builds one thing.
  absl::Status Init();
  absl::Status CheckConfig() const;
  absl::Status InitDevice();        // stop signals, topology, device, allocators
  absl::Status InitParallelPlan();  // the plan, mesh, dp coordinates, accumulation
  absl::Status InitData();          // this rank's loaders
  absl::Status InitModel();         // model, parameters, strategies applied
  absl::Status InitOptimizer();     // targets, optimizer, LR schedule
  absl::Status InitResumeAndLog();  // --resume's checkpoint, the metrics logger
  absl::Status InitStepSchedule();  // the order of forwards and backwards
  void LogStartup();
  absl::Status ResolveDevice(const JobTopology& topology);
  absl::Status InitCheckpointing();
  // At the end of Run, rank 0 logs the largest peak of any rank
  // (worst_rank_peak.h); the step lines show rank 0's own.
  absl::Status LogWorstRankPeak();
  // Run's loop; Run adds the flight recorder's dump on failure.
  absl::Status RunSteps();
  absl::Status RefuseNewerCheckpoints() const;
  // Loads a checkpoint (resharding it to this rank's pieces) and continues
  // from its step: what --resume does at startup.
  absl::Status ResumeFrom(const ckpt::Checkpoint& ck);
  // After state was loaded into the optimizer's targets: lower-precision
  // parameters from their masters, and replicas (zero-1/2's full
  // parameters) from the shards.
  absl::Status PublishLoadedState();
  void LogCheckpoint(bool after_save);
  class StepRunner;
  // --cuda_graph: refuses what a replay cannot repeat, makes the graph
  // (trainer_graph.cc).
  absl::Status InitStepGraph();
  // Steps run eagerly before the capture: the first one creates what is made
  // once (GEMM plans, workspaces, optimizer state, kernel attributes), so the
  // captured step only repeats work; the second confirms nothing else is.
  static constexpr int64_t kEagerStepsBeforeCapture = 2;
  // The step's device work, from zeroing the gradients to the optimizer
  // update: run eagerly, or recorded once into the step graph.
  absl::Status IssueStep(StepRunner& runner, float lr);
  // A --cuda_graph step after the eager warm-up: the batch into the static
  // buffers, then the captured step (captured first if it is not yet).
  absl::Status RunGraphStep(float lr);
  // Several ranks with stop_on_signal_: puts this rank's pending stop signal
  // into stop_signal_ and starts taking the maximum over the job (stop_work_,
  // waited for at the step's end), so every rank reads the same value with
  // the step's loss, without another host wait.
  absl::Status ShareStopSignal();
  // Waits for ShareStopSignal's exchange (the step's end).
  absl::Status FinishStopSignalShare();
  // Several ranks with stop_on_signal_: the group over the whole mesh.
  absl::Status InitStopGroup();
  // After a stop signal: the checkpoint, the async save joined, and a line
  // saying how to continue.
  absl::Status StopForSignal(int signal);
  // The next micro-batch of the train loader, ordered before the compute
  // stream's next work (its wait counts as the step's data wait).
  absl::StatusOr<data::Batch> NextTrainBatch();
  // The LR schedule in words, recorded in checkpoints: a resume under
  // another one (often another --steps) is noted.
  std::string LrScheduleText() const;
  // The job's Describe(), or the TrainConfig alone when it gives none.
  std::string JobText() const;
  // The dropout masks' step seed (RunContext::dropout_seed).
  uint64_t StepDropoutSeed() const;

  Options options_;
  const TrainConfig& cfg() const { return options_.config; }
  // Declared first so they are destroyed last: the model, optimizer and
  // strategies hold tensors allocated through them.
  std::unique_ptr<TrackingAllocator> param_alloc_;
  std::unique_ptr<TrackingAllocator> grad_alloc_;
  std::unique_ptr<TrackingAllocator> optim_alloc_;
  std::unique_ptr<TrackingAllocator> act_alloc_;  // ctx_.allocator
  // Before the loaders and groups, which call into it, so it outlives them.
  std::unique_ptr<Instruments> instruments_;
  std::optional<Stream> stream_;
  Stream host_stream_ = Stream::Default(Device::Cpu());
  // --cuda_graph only. After the stream it replays on (destroyed before it),
  // before the model (modules may keep memory from the graph's allocator).
  std::unique_ptr<StepGraph> graph_;
  RunContext ctx_;
  std::unique_ptr<Model> model_;
  std::optional<ParallelPlan> plan_;  // resolved once, read by everyone
  std::unique_ptr<ParallelState> parallel_;
  DataLoaders loaders_;
  data::LoaderState val_start_;  // the validation loader's first batch
  std::vector<std::string> startup_notes_;  // printed with the strategies' notes
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<LrSchedule> schedule_;
  std::shared_ptr<const StepSchedule> step_schedule_;
  std::optional<MetricsLogger> logger_;
  Tensor step_scalars_;  // f32 [3] on the device: read once per step
  Tensor loss_sum_;      // view of step_scalars_[0]
  Tensor grad_norm_sq_;  // view of step_scalars_[1]
  Tensor stop_signal_;   // view of step_scalars_[2]: the job's stop signal
  // --save_on_signal with a checkpoint directory: stop signals save and stop.
  bool stop_on_signal_ = false;
  // Several ranks: every rank's pending stop signal, maximised over them
  // inside each step (null otherwise).
  std::shared_ptr<comm::ProcessGroup> stop_group_;
  std::shared_ptr<comm::Work> stop_work_;
  JobTopology topology_;
  DType grad_dtype_ = DType::kF32;
  int64_t accum_steps_ = 1;
  int64_t step_ = 0;
  int64_t targets_per_sample_ = 0;  // of the last step's batches
  int64_t eager_steps_ = 0;         // by this trainer (a resumed run warms up too)
  double flops_per_target_ = 0;
  double peak_flops_ = 0;
  std::vector<StepStats> history_;
  // Rank 0's lock on --checkpoint_dir (dir_lock.h); outlives the saves.
  std::unique_ptr<ckpt::DirLock> checkpoint_lock_;
  std::unique_ptr<ckpt::Checkpointer> checkpointer_;
  std::optional<ckpt::Checkpoint> resume_from_;  // --resume's, read once in Init
  int64_t logged_save_step_ = 0;
  // The resumed run's evaluation size when --eval_samples is unset (0: none).
  int64_t resumed_eval_samples_ = 0;
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_TRAINER_H_
