// Trainer::Run: the loop over steps with its log lines, evaluations and
// checkpoints, and the end-of-run report (trainer.h).
#include "core/runtime/trainer.h"

#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/runtime/flight_dump.h"
#include "core/runtime/worst_rank_peak.h"

namespace weft {

absl::Status Trainer::LogWorstRankPeak() {
  if (parallel_->world_size <= 1 || topology_.store == nullptr || history_.empty()) {
    return absl::OkStatus();
  }
  WEFT_ASSIGN_OR_RETURN(
      RankPeak worst,
      WorstRankPeak(*topology_.store, parallel_->world_rank, parallel_->world_size,
                    history_.back().peak_mem_mb, absl::Seconds(cfg().parallel().timeout_s())));
  if (parallel_->world_rank != 0) return absl::OkStatus();
  logger_->Print(absl::StrFormat("peak memory: %.2f MiB on rank %d, the most of %d ranks",
                                 worst.peak_mem_mb, worst.rank, parallel_->world_size));
  logger_->Log(MetricsLogger::Record()
                   .Add("step", step_)
                   .Add("peak_mem_mb_max", worst.peak_mem_mb)
                   .Add("peak_mem_rank", worst.rank),
               /*to_console=*/false);
  return absl::OkStatus();
}

absl::Status Trainer::Run() {
  absl::Status s = RunSteps();
  // Any failure (a peer's, a timeout, this rank's own) leaves the ops this
  // rank issued last for //tools:hang_report.
  if (!s.ok() && parallel_->world_size > 1) {
    DumpFlightRecorder(absl::StrCat("failed: ", s.message()));
  }
  return s;
}

absl::Status Trainer::RunSteps() {
  const TrainConfig& c = cfg();
  // A resumed trainer starts at its checkpoint's step.
  while (step_ < c.steps()) {
    WEFT_ASSIGN_OR_RETURN(StepStats s, TrainStep());
    if (c.log_every() > 0 && (s.step % c.log_every() == 0 || s.step == 1 || s.step == c.steps())) {
      MetricsLogger::Record r;
      r.Add("step", s.step).Add("loss", s.loss).Add("lr", s.lr).Add("step_ms", s.step_ms);
      r.Add("tokens_per_s", s.tokens_per_s).Add("mfu", s.mfu).Add("peak_mem_mb", s.peak_mem_mb);
      r.Add("data_wait_ms", s.data_wait_ms).Add("forward_ms", s.forward_ms);
      r.Add("backward_ms", s.backward_ms).Add("exposed_comm_ms", s.exposed_comm_ms);
      r.Add("optimizer_ms", s.optimizer_ms).Add("other_ms", s.other_ms);
      r.Add("comm_mb", s.comm_mb).Add("host_issue_ms", s.host_issue_ms);
      if (c.optim().grad_clip() > 0) r.Add("grad_norm", s.grad_norm);
      for (const auto& [k, v] : s.extra) r.Add(k, v);
      // The bar shows progress on a terminal; the file keeps every line.
      logger_->Log(r, !c.quiet() && instruments_->progress().mode() != Progress::Mode::kBar);
    }
    instruments_->AfterStep(s.step, s.loss, s.tokens_per_s);
    // The last step ends the run as usual; before it, a stop signal saves
    // and stops (every rank reads the same s.stop_signal), in place of
    // this step's periodic save.
    if (s.stop_signal != 0 && s.step < c.steps()) return StopForSignal(s.stop_signal);
    if (loaders_.val != nullptr && EvalSamples() > 0 && c.eval_every() > 0 &&
        s.step % c.eval_every() == 0 && s.step != c.steps()) {
      WEFT_ASSIGN_OR_RETURN(double v, Evaluate(EvalSamples()));
      logger_->Log(MetricsLogger::Record().Add("step", s.step).Add("val_loss", v));
    }
    // A checkpoint directory always gets the end state, periodic saves or not.
    const bool periodic = c.checkpoint_every() > 0 && s.step % c.checkpoint_every() == 0;
    if (!c.checkpoint_dir().empty() && (periodic || s.step == c.steps())) {
      WEFT_RETURN_IF_ERROR(SaveCheckpoint());
    }
    WEFT_RETURN_IF_ERROR(options_.job->AfterStep(*this, s.step));
  }
  WEFT_RETURN_IF_ERROR(FinishCheckpoints());
  if (loaders_.val != nullptr && EvalSamples() > 0) {  // --eval_batches=0: no evaluation
    WEFT_ASSIGN_OR_RETURN(double v, Evaluate(EvalSamples()));
    logger_->Log(MetricsLogger::Record().Add("step", step_).Add("val_loss", v));
  }
  WEFT_RETURN_IF_ERROR(LogWorstRankPeak());
  return instruments_->Finish();
}

}  // namespace weft
