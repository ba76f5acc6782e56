// The shared main() of training targets: handles --nproc_per_node=N (the
// binary relaunches itself as N ranks, see tools/launch/relaunch.h), parses
// --config and flag overrides into the job message, handles --help, runs the
// job and maps errors to exit codes (0 ok, 1 runtime error, 2 bad command
// line, 128 + the signal when SIGTERM/SIGUSR1 stopped the run after a
// checkpoint, see core/runtime/stop_signals.h) with the Status message on
// stderr. Relative paths are resolved
// against the directory `bazel run` was invoked from.
#ifndef WEFT_TOOLS_TRAIN_MAIN_TRAIN_MAIN_H_
#define WEFT_TOOLS_TRAIN_MAIN_TRAIN_MAIN_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "core/base/user_path.h"
#include "core/runtime/train_config.pb.h"
#include "google/protobuf/message.h"

namespace weft {

int TrainMain(int argc, char** argv, const std::string& usage, google::protobuf::Message* job,
              const std::function<absl::Status()>& run);

// --checkpoint_dir and --resume through ResolveUserPath; --resume's
// keywords ("latest", "auto": checkpoint/layout.h) stay as they are.
void ResolveCheckpointPaths(TrainConfig* config);

}  // namespace weft

#endif  // WEFT_TOOLS_TRAIN_MAIN_TRAIN_MAIN_H_
