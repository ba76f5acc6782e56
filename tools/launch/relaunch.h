// MaybeRelaunchSelf: lets any training binary accept --nproc_per_node=N and
// start itself N times under the launcher, instead of needing
// `bazel run //tools:launch -- ... -- <binary>`:
//
//   int main(int argc, char** argv) {
//     auto relaunch = weft::launch::MaybeRelaunchSelf(&argc, argv);
//     if (!relaunch.ok()) { std::fprintf(stderr, "%s\n", relaunch.status().ToString().c_str()); return 2; }
//     if (relaunch->relaunched) return relaunch->exit_code;  // we were the launcher
//     absl::ParseCommandLine(argc, argv);                     // a worker (or a plain run)
//     ...
//
// It removes the launcher's flags (--nproc_per_node, --nnodes, --node_rank,
// --master_addr, --master_port, --launch_output, --teardown_grace_s,
// --stop_grace_s) from
// argv in every case, so the program's own flag parser never sees them.
// With --nproc_per_node present and no RANK in the environment, it runs
// this executable (/proc/self/exe) with the remaining arguments as the
// workers of Launch() and reports the job's exit code; otherwise (no flag,
// or already a worker of torchrun/srun/the launcher) it returns
// relaunched = false and the program continues as a rank.
#ifndef WEFT_TOOLS_LAUNCH_RELAUNCH_H_
#define WEFT_TOOLS_LAUNCH_RELAUNCH_H_

#include "absl/status/statusor.h"

namespace weft::launch {

struct RelaunchResult {
  // True when this process acted as the launcher (and the job is over).
  bool relaunched = false;
  int exit_code = 0;
};

absl::StatusOr<RelaunchResult> MaybeRelaunchSelf(int* argc, char** argv);

}  // namespace weft::launch

#endif  // WEFT_TOOLS_LAUNCH_RELAUNCH_H_
