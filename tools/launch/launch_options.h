// LaunchOptions and the launcher's command-line flags, shared by the
// `launch` binary and by MaybeRelaunchSelf (relaunch.h).
//
//   --nproc_per_node=N   workers on this node (required)
//   --nnodes=M           nodes in the job (default 1)
//   --node_rank=R        this node's index (default 0)
//   --master_addr=A      host of rank 0 and of the store (default 127.0.0.1)
//   --master_port=P      store port (default: a free port; required when M > 1)
//   --output=prefix|rank0|raw   prefix lines with "[rank N] " (default), show
//                        only rank 0, or pass output through untouched
//   --teardown_grace_s=S seconds between SIGTERM and SIGKILL when a worker
//                        failed, or after a forwarded SIGINT/SIGHUP (default 5)
//   --stop_grace_s=S     seconds between forwarding SIGTERM/SIGUSR1 and
//                        SIGKILL: time for the workers to save (default 120)
// Both "--flag=value" and "--flag value" work. Parsing stops at "--".
#ifndef WEFT_TOOLS_LAUNCH_LAUNCH_OPTIONS_H_
#define WEFT_TOOLS_LAUNCH_LAUNCH_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace weft::launch {

enum class OutputMode { kPrefix, kRank0, kRaw };

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  // 0: pick a free port (single node only).
  int master_port = 0;
  OutputMode output = OutputMode::kPrefix;
  // Between SIGTERM and SIGKILL when tearing workers down.
  absl::Duration teardown_grace = absl::Seconds(5);
  // Between forwarding SIGTERM/SIGUSR1 to the workers and SIGKILL: trainers
  // with --save_on_signal finish the step and save a checkpoint first.
  absl::Duration stop_grace = absl::Seconds(120);
  // Node 0's launcher hosts the TCP store (workers get WEFT_LAUNCHER_STORE=1);
  // when false, rank 0 hosts it.
  bool host_store = true;

  int world_size() const { return nnodes * nproc_per_node; }
  // Checks ranges and combinations; errors name the flag.
  absl::Status Validate() const;
};

struct ParsedLaunchArgs {
  LaunchOptions options;
  bool saw_nproc_per_node = false;
  // The arguments that were not launcher flags, in order ("--" removed when
  // it ended the launcher's flags).
  std::vector<std::string> rest;
};

// Parses launcher flags out of `args`. `output_flag` is the name of the
// output-mode flag ("output" for the launch binary; "launch_output" for
// programs that relaunch themselves, whose own --output must pass through).
// With `stop_at_first_positional`, everything from the first non-flag
// argument on is the command (the launch binary); otherwise unknown flags
// and positionals are kept in `rest` and scanning continues (relaunch).
absl::StatusOr<ParsedLaunchArgs> ParseLaunchArgs(const std::vector<std::string>& args,
                                                 absl::string_view output_flag,
                                                 bool stop_at_first_positional);

absl::StatusOr<OutputMode> ParseOutputMode(absl::string_view text);

}  // namespace weft::launch

#endif  // WEFT_TOOLS_LAUNCH_LAUNCH_OPTIONS_H_
