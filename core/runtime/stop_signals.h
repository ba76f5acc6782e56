// Stop signals: SIGTERM and SIGUSR1 ask a training run to save a checkpoint
// after the step in flight and stop, instead of killing it mid-step (Slurm
// sends SIGTERM when it preempts or cancels a job, and SIGUSR1 before the
// time limit with `--signal=USR1@SECONDS`). The trainer installs them when
// --save_on_signal is on and --checkpoint_dir is set (trainer.h); the
// program then exits with 128 + the signal, the status a shell reports for
// a process the signal stopped, so schedulers and scripts see an unfinished
// run.
#ifndef WEFT_CORE_RUNTIME_STOP_SIGNALS_H_
#define WEFT_CORE_RUNTIME_STOP_SIGNALS_H_

#include "absl/status/status.h"

namespace weft {

// Once per process (later calls do nothing). Blocks the signals in the
// calling thread, so the threads it starts later (data workers, comm
// threads) inherit the mask and none of their blocking calls is interrupted,
// and starts a thread that takes them with sigwait. A handler that only
// records the signal covers threads already running, and a child forked
// later (which has no such thread) starts with nothing pending and the
// signals unblocked, so the handler records its own.
absl::Status InstallStopSignals();

// The first stop signal this process received, or 0.
int PendingStopSignal();

// Set by the trainer when it stopped early for `signal`; the shared main()
// returns 128 + StoppedBySignal() then (0: the run was not stopped).
void NoteStoppedBySignal(int signal);
int StoppedBySignal();

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_STOP_SIGNALS_H_
