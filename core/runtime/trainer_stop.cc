// The trainer's stop signals (stop_signals.h, --save_on_signal): the job's
// group that shares them, the exchange inside each step, and the stop.
#include <string.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "checkpoint/layout.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/stop_signals.h"
#include "core/runtime/trainer.h"

namespace weft {

absl::Status Trainer::InitStopGroup() {
  if (!stop_on_signal_ || parallel_->world_size <= 1) return absl::OkStatus();
  if (parallel_->mesh == nullptr) return Internal("several ranks without a device mesh");
  WEFT_ASSIGN_OR_RETURN(stop_group_, parallel_->mesh->WorldGroup());
  return absl::OkStatus();
}

absl::Status Trainer::ShareStopSignal() {
  if (stop_group_ == nullptr) return absl::OkStatus();
  WEFT_RETURN_IF_ERROR(stop_signal_.Zero(ctx_.stream));
  if (const int sig = PendingStopSignal(); sig != 0) {
    WEFT_ASSIGN_OR_RETURN(Tensor host, Tensor::FromFloats({static_cast<float>(sig)}, {1}));
    WEFT_RETURN_IF_ERROR(stop_signal_.CopyFrom(host, ctx_.stream));
  }
  stop_work_ = stop_group_->AllReduce(stop_signal_, {.op = comm::ReduceOp::kMax, .stream = ctx_.stream});
  return absl::OkStatus();
}

absl::Status Trainer::FinishStopSignalShare() {
  if (stop_work_ == nullptr) return absl::OkStatus();
  const absl::Status shared = stop_work_->Wait();
  stop_work_.reset();
  return shared;
}

absl::Status Trainer::StopForSignal(int signal) {
  // Slurm kills the job KillWait seconds (30 by default) after its SIGTERM:
  // no evaluation, sampling or end-of-run gathering, only the state.
  WEFT_RETURN_IF_ERROR(SaveCheckpoint());
  WEFT_RETURN_IF_ERROR(FinishCheckpoints());
  NoteStoppedBySignal(signal);
  logger_->Print(absl::StrFormat(
      "stopped by %s after step %d of %d: checkpoint %s/%s saved; continue with --resume=latest",
      sigabbrev_np(signal) != nullptr ? absl::StrCat("SIG", sigabbrev_np(signal)) : "a signal",
      step_, cfg().steps(), cfg().checkpoint_dir(), ckpt::StepDirName(step_)));
  logger_->Log(MetricsLogger::Record().Add("step", step_).Add("stopped_by_signal", signal),
               /*to_console=*/false);
  WEFT_RETURN_IF_ERROR(instruments_->Finish());
  // The other ranks leave after rank 0 has said so (srun --kill-on-bad-exit
  // kills the rest of a step as soon as one task exits non-zero), and rank
  // 0, which hosts the store without a launcher, after they have read it.
  if (parallel_->world_size <= 1 || topology_.store == nullptr) return absl::OkStatus();
  comm::Store& store = *topology_.store;
  const std::string said = absl::StrCat("weft_stopped/", step_);
  const absl::Duration timeout = absl::Seconds(cfg().parallel().timeout_s());
  if (parallel_->world_rank != 0) {
    WEFT_RETURN_IF_ERROR(store.Wait({said}, timeout));
    return store.Set(absl::StrCat(said, "/left/", parallel_->world_rank), "1");
  }
  WEFT_RETURN_IF_ERROR(store.Set(said, "1"));
  for (int r = 1; r < parallel_->world_size; ++r) {
    WEFT_RETURN_IF_ERROR(store.Get(absl::StrCat(said, "/left/", r), timeout).status());
  }
  return absl::OkStatus();
}

}  // namespace weft
