// Launch: runs one node's share of a distributed job, like torchrun.
//
// Starts options.nproc_per_node copies of `command`, each with the torchrun
// environment: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK
// (node rank), MASTER_ADDR, MASTER_PORT, plus OMP_NUM_THREADS=1 when several
// workers share the node and it is unset. On node 0 the launcher hosts the
// job's TCP store at MASTER_ADDR:MASTER_PORT (picking a free port when
// none was given) and tells workers with WEFT_LAUNCHER_STORE=1. Workers
// also get WEFT_LAUNCHED=1, so they can say what started them.
//
// While the job runs:
//   - worker output is prefixed "[rank N] " per line, or only rank 0 is
//     shown (the last stderr lines of a failed worker are printed anyway);
//   - SIGINT/SIGTERM/SIGHUP/SIGUSR1 to the launcher are forwarded to every
//     worker's process group, then SIGKILL follows after
//     options.stop_grace for SIGTERM/SIGUSR1 (trainers save a checkpoint
//     first, see core/runtime/stop_signals.h) or options.teardown_grace for
//     the others; a second SIGINT kills them at once;
//   - when a worker fails (non-zero exit or a signal), the others get
//     SIGTERM, then SIGKILL after options.teardown_grace;
//   - workers die with the launcher (PR_SET_PDEATHSIG), so a killed
//     launcher leaves no orphans.
//   - each worker gets WEFT_ERROR_FILE (error_file.h); when a rank other
//     than the first one reaped failed first (its peers then fail on the
//     lost connection), the launcher names it with its error at the end.
// Returns the job's exit code: the first failed worker's code (128 + signal
// for a signal), else 128 + the signal that stopped the launcher, else 0.
#ifndef WEFT_TOOLS_LAUNCH_LAUNCHER_H_
#define WEFT_TOOLS_LAUNCH_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch/launch_options.h"

namespace weft::launch {

absl::StatusOr<int> Launch(const LaunchOptions& options, const std::vector<std::string>& command);

}  // namespace weft::launch

#endif  // WEFT_TOOLS_LAUNCH_LAUNCHER_H_
