#include "core/runtime/instruments.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/base/json.h"

namespace weft {

absl::StatusOr<StepRange> ParseStepRange(const std::string& spec) {
  StepRange r;
  if (spec.empty()) return r;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  const bool ok = (parts.size() == 1 || parts.size() == 2) &&
                  absl::SimpleAtoi(parts[0], &r.first) && absl::SimpleAtoi(parts.back(), &r.last) &&
                  r.first >= 1 && r.last >= r.first;
  if (!ok) {
    return InvalidArgument(absl::StrCat("--trace_steps=", spec),
                           "FIRST:LAST with 1 <= FIRST <= LAST (steps are 1-based), or one step",
                           "e.g. --trace_steps=10:12 traces steps 10, 11 and 12");
  }
  return r;
}

// Forwards a group's waits to the instruments; detached when they go, since
// process groups can outlive the trainer's parts.
class Instruments::CommObserver : public comm::OpObserver {
 public:
  explicit CommObserver(Instruments* owner) : owner_(owner) {}
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    owner_ = nullptr;
  }
  void OnWaitBegin(const comm::OpInfo&) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (owner_ != nullptr) owner_->timer_.Enter(StepPart::kExposedComm);
  }
  void OnWaitEnd(const comm::ObservedOp& op) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (owner_ == nullptr) return;
    owner_->timer_.Leave();
    owner_->OnCollective(op);
  }

 private:
  std::mutex mu_;
  Instruments* owner_;
};

Instruments::Instruments(Options options)
    : options_(std::move(options)),
      timer_(*options_.stream),
      progress_(options_.progress, options_.total_steps),
      observer_(std::make_shared<CommObserver>(this)),
      run_begin_us_(comm::WallMicros()) {
  if (!options_.trace_dir.empty() && !options_.trace_steps.empty()) {
    trace_ = std::make_unique<TraceWriter>(options_.rank);
    trace_->NameTrack(TraceWriter::kStepTrack, "step phases");
  }
}

Instruments::~Instruments() { observer_->Detach(); }

std::shared_ptr<comm::OpObserver> Instruments::comm_observer() const { return observer_; }

std::function<void(int, int64_t, int64_t, int64_t)> Instruments::loader_hook() {
  if (trace_ == nullptr) return nullptr;
  return [this](int worker, int64_t seq, int64_t begin_us, int64_t end_us) {
    if (!tracing()) return;
    const int tid = TraceWriter::kFirstLoaderTrack + 1 + worker;
    trace_->NameTrack(tid, worker < 0 ? std::string("data loader (training thread)")
                                      : absl::StrCat("data loader worker ", worker));
    trace_->Add(tid, "assemble batch", "data", begin_us, end_us - begin_us,
                absl::StrCat("\"batch\":", seq, ",\"worker\":", worker));
  };
}

void Instruments::StartGpuSampling() {
  // Only rank 0 writes metrics, so only rank 0 samples (its own GPU).
  if (options_.gpu_sample_s <= 0 || !options_.stream->device().is_cuda() || options_.rank != 0) {
    return;
  }
  gpu_ = std::make_unique<GpuSampler>(
      GpuSampler::Options{.device = options_.stream->device().index,
                          .period = absl::Seconds(options_.gpu_sample_s),
                          .library = options_.nvml_library});
  const std::string note = gpu_->Start();
  if (!note.empty()) {
    gpu_.reset();
    if (logger_ != nullptr) logger_->Print(note);
  }
}

void Instruments::AddPipelineAction(const std::string& label, int64_t begin_us, int64_t end_us) {
  if (!tracing()) return;
  std::call_once(pipeline_track_named_,
                 [this] { trace_->NameTrack(TraceWriter::kPipelineTrack, "pipeline actions"); });
  trace_->Add(TraceWriter::kPipelineTrack, label, "pipeline", begin_us, end_us - begin_us);
}

int Instruments::CommTrack(const std::string& group) {
  std::lock_guard<std::mutex> lock(tracks_mu_);
  auto [it, added] = comm_tracks_.emplace(
      group, TraceWriter::kFirstCommTrack + static_cast<int>(comm_tracks_.size()));
  if (added) trace_->NameTrack(it->second, "comm " + group);
  return it->second;
}

void Instruments::OnCollective(const comm::ObservedOp& op) {
  step_comm_bytes_.fetch_add(op.payload_bytes, std::memory_order_relaxed);
  if (!tracing()) return;
  // Host backends know when the op ran; stream-ordered ones (NCCL) only
  // when it was issued and waited for, which is what the span then shows.
  const bool host_timed = op.started_us.has_value();
  const int64_t begin = host_timed ? *op.started_us : op.issued_us;
  const int64_t end = host_timed ? *op.finished_us : op.wait_end_us;
  trace_->Add(
      CommTrack(op.info->group), op.info->op, "comm", begin, end - begin,
      absl::StrCat("\"group\":\"", JsonEscape(op.info->group), "\",\"seq\":", op.info->seq,
                   ",\"bytes\":", op.payload_bytes, ",\"detail\":\"", JsonEscape(op.info->detail),
                   "\",\"wait_us\":", op.wait_end_us - op.wait_begin_us, ",\"timing\":\"",
                   host_timed ? "host" : "issue_to_wait", "\",\"ok\":", op.ok ? "true" : "false"));
}

void Instruments::BeginStep(int64_t step) {
  step_ = step;
  if (first_step_ == 0) first_step_ = step;
  step_comm_bytes_.store(0, std::memory_order_relaxed);
  tracing_.store(trace_ != nullptr && !trace_written_ && options_.trace_steps.Contains(step),
                 std::memory_order_relaxed);
  step_begin_us_ = comm::WallMicros();
  timer_.BeginStep();
}

absl::StatusOr<Instruments::StepReport> Instruments::EndStep(double step_ms) {
  StepReport r;
  std::vector<PartSpan> spans;
  WEFT_ASSIGN_OR_RETURN(r.parts, timer_.Finish(step_ms, tracing() ? &spans : nullptr));
  r.comm_mb = static_cast<double>(step_comm_bytes_.load(std::memory_order_relaxed)) / (1 << 20);
  if (tracing()) {
    if (traced_first_ == 0) traced_first_ = step_;
    traced_last_ = step_;
    std::string parts_args;
    for (int p = 0; p < kNumStepParts; ++p) {
      absl::StrAppend(&parts_args, p ? "," : "", "\"", StepPartName(static_cast<StepPart>(p)),
                      "_ms\":", absl::StrFormat("%.3f", r.parts.ms[p]));
    }
    trace_->Add(TraceWriter::kStepTrack, absl::StrCat("step ", step_), "step", step_begin_us_,
                static_cast<int64_t>(step_ms * 1000), parts_args);
    for (const PartSpan& s : spans) {
      if (s.dur_ms < 0.001) continue;  // a switch with nothing in between
      // On CUDA span times are device times from the step's first event,
      // placed on the host clock at the step's start.
      trace_->Add(TraceWriter::kStepTrack, std::string(StepPartName(s.part)), "phase",
                  step_begin_us_ + static_cast<int64_t>(s.begin_ms * 1000),
                  static_cast<int64_t>(s.dur_ms * 1000));
    }
    if (step_ == options_.trace_steps.last) {
      tracing_.store(false, std::memory_order_relaxed);
      WEFT_RETURN_IF_ERROR(WriteTrace());
    }
  }
  return r;
}

void Instruments::AfterStep(int64_t step, double loss, double tokens_per_s) {
  progress_.Update(step, loss, tokens_per_s,
                   static_cast<double>(comm::WallMicros() - run_begin_us_) / 1e6);
  if (gpu_ == nullptr || logger_ == nullptr) return;
  for (const GpuSample& s : gpu_->Drain()) {
    MetricsLogger::Record r;
    r.Add("step", step).Add("time_s", static_cast<double>(s.wall_us - run_begin_us_) / 1e6);
    r.Add("gpu", s.device).Add("gpu_util", s.util_pct).Add("gpu_mem_mb", s.mem_used_mb);
    r.Add("gpu_mem_total_mb", s.mem_total_mb).Add("gpu_power_w", s.power_w);
    r.Add("gpu_temp_c", s.temp_c);
    logger_->Log(r, /*to_console=*/false);
  }
}

absl::Status Instruments::WriteTrace() {
  trace_written_ = true;
  mkdir(options_.trace_dir.c_str(), 0755);  // an existing directory is fine
  return trace_->Write(RankTracePath(options_.trace_dir, options_.rank));
}

absl::Status Instruments::Finish() {
  progress_.Finish();
  tracing_.store(false);
  if (trace_ == nullptr) return absl::OkStatus();
  if (traced_first_ == 0) {
    // Every rank runs the same steps, so none has a trace to merge.
    if (options_.rank == 0 && logger_ != nullptr) logger_->Print(NothingTracedNote());
    return absl::OkStatus();
  }
  if (!trace_written_) WEFT_RETURN_IF_ERROR(WriteTrace());
  if (options_.rank != 0) return absl::OkStatus();
  // Other ranks write theirs at the same step; on hosts that do not share
  // the directory they never appear here, and the merge names who is missing.
  std::vector<std::string> found, missing;
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options_.merge_wait_s * 1e3));
  for (int r = 0; r < options_.world_size; ++r) {
    const std::string path = RankTracePath(options_.trace_dir, r);
    struct stat st;
    while (stat(path.c_str(), &st) != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    (stat(path.c_str(), &st) == 0 ? found : missing).push_back(path);
  }
  const std::string merged = MergedTracePath(options_.trace_dir);
  WEFT_RETURN_IF_ERROR(MergeTraceFiles(found, merged));
  if (logger_ != nullptr) {
    logger_->Print(absl::StrCat(
        "trace: steps ", traced_first_, "-", traced_last_, " of ", found.size(), " rank(s) in ",
        merged, " (open it at https://ui.perfetto.dev)",
        traced_last_ < options_.trace_steps.last
            ? absl::StrCat("; the run ended before step ", options_.trace_steps.last)
            : "",
        missing.empty() ? "" : absl::StrCat("; missing ", missing.size(), " rank file(s)")));
  }
  return absl::OkStatus();
}

std::string Instruments::NothingTracedNote() const {
  const std::string window =
      absl::StrCat("--trace_steps=", options_.trace_steps.first, ":", options_.trace_steps.last);
  if (first_step_ == 0) {
    return absl::StrCat("trace: no step traced (", window, "): the run took no steps");
  }
  const int64_t last = step_;
  return absl::StrCat("trace: no step traced: ", window, " lies outside this run's steps ",
                      first_step_, "-", last, ", so nothing was written to ", options_.trace_dir,
                      "; set --trace_steps within them, e.g. --trace_steps=",
                      std::max(first_step_, last - 2), ":", last);
}

}  // namespace weft
