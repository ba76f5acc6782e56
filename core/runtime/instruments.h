// Instruments: what the trainer measures and shows besides the loss, kept
// out of the training loop: the step breakdown (step_timer.h), traces of
// chosen steps (trace_writer.h), GPU samples (gpu_sampler.h) and rank 0's
// progress (progress.h).
//
// The trainer wires three hooks before anything runs: comm_observer() into
// its process groups (exposed comm time, collectives in the trace),
// loader_hook() into its data loaders (worker activity in the trace), and
// timer() around the step's parts. Per step it calls BeginStep, MarkEnd
// (before its one host synchronization) and EndStep (after it).
#ifndef WEFT_CORE_RUNTIME_INSTRUMENTS_H_
#define WEFT_CORE_RUNTIME_INSTRUMENTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group/op_observer.h"
#include "core/runtime/gpu_sampler.h"
#include "core/runtime/metrics.h"
#include "core/runtime/progress.h"
#include "core/runtime/step_timer.h"
#include "core/runtime/trace_writer.h"
#include "core/tensor/stream.h"

namespace weft {

// Steps first..last (1-based, inclusive) from "--trace_steps=10:12" ("7"
// is 7:7); empty spec: none.
struct StepRange {
  int64_t first = 0;
  int64_t last = -1;
  bool Contains(int64_t step) const { return step >= first && step <= last; }
  bool empty() const { return last < first; }
};
absl::StatusOr<StepRange> ParseStepRange(const std::string& spec);

class Instruments {
 public:
  struct Options {
    int rank = 0;
    int world_size = 1;
    const Stream* stream = nullptr;  // the compute stream; must outlive this
    int64_t total_steps = 0;
    std::string trace_dir;  // empty: no trace
    StepRange trace_steps;
    // GPU sampling period; 0 or a CPU device: off.
    double gpu_sample_s = 1.0;
    std::string nvml_library = "libnvidia-ml.so.1";
    Progress::Mode progress = Progress::Mode::kOff;
    // How long rank 0 waits for the other ranks' trace files to merge them.
    double merge_wait_s = 60;
  };

  explicit Instruments(Options options);
  ~Instruments();

  std::shared_ptr<comm::OpObserver> comm_observer() const;
  std::function<void(int, int64_t, int64_t, int64_t)> loader_hook();
  StepTimer* timer() { return &timer_; }
  Progress& progress() { return progress_; }
  // Where GPU samples and one-line notes go (rank 0's logger).
  void set_logger(MetricsLogger* logger) { logger_ = logger; }

  // Starts GPU sampling (CUDA only); notes why not in one line when NVML is
  // missing.
  void StartGpuSampling();

  void BeginStep(int64_t step);
  void MarkEnd() { timer_.MarkEnd(); }
  struct StepReport {
    StepBreakdown parts;
    double comm_mb = 0;  // payload of the collectives this rank waited on
  };
  // After the step's synchronization. Writes this rank's trace after the
  // last traced step.
  absl::StatusOr<StepReport> EndStep(double step_ms);
  // After the step is logged: progress, and GPU samples into the metrics.
  void AfterStep(int64_t step, double loss, double tokens_per_s);
  // End of the run: writes a trace not yet written; rank 0 merges the ranks'
  // traces. When the run took none of the trace steps nothing is written,
  // and rank 0 says so (the window names steps the run did not reach).
  absl::Status Finish();

  bool tracing() const { return tracing_.load(std::memory_order_relaxed); }
  // A pipeline action ("F3", "B2:1") on this rank's "pipeline" track, in
  // host time (on CUDA: when it was issued); only while tracing.
  void AddPipelineAction(const std::string& label, int64_t begin_us, int64_t end_us);
  TraceWriter* trace() { return trace_.get(); }

 private:
  class CommObserver;
  void OnCollective(const comm::ObservedOp& op);
  int CommTrack(const std::string& group);
  absl::Status WriteTrace();
  std::string NothingTracedNote() const;

  const Options options_;
  StepTimer timer_;
  Progress progress_;
  std::shared_ptr<CommObserver> observer_;
  std::unique_ptr<TraceWriter> trace_;
  std::unique_ptr<GpuSampler> gpu_;
  MetricsLogger* logger_ = nullptr;
  std::atomic<bool> tracing_{false};
  bool trace_written_ = false;
  std::atomic<int64_t> step_comm_bytes_{0};
  int64_t step_ = 0;
  int64_t first_step_ = 0;                  // of this run (a resumed one starts late)
  int64_t traced_first_ = 0, traced_last_ = 0;  // 0: none traced yet
  int64_t step_begin_us_ = 0;
  int64_t run_begin_us_ = 0;
  std::mutex tracks_mu_;
  std::map<std::string, int> comm_tracks_;
  std::once_flag pipeline_track_named_;
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_INSTRUMENTS_H_
