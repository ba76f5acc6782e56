#include "tools/train_main/train_main.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "core/parallel/strategy_options.h"
#include "core/runtime/config_loader.h"
#include "tools/launch/relaunch.h"

namespace weft {

std::string ResolveUserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  return cwd != nullptr ? std::string(cwd) + "/" + path : path;
}

int TrainMain(int argc, char** argv, const std::string& usage, google::protobuf::Message* job,
              const std::function<absl::Status()>& run) {
  // --nproc_per_node=N (and the other launch flags): become the launcher of
  // N copies of this binary, or, as a worker, just drop those flags.
  absl::StatusOr<launch::RelaunchResult> relaunch = launch::MaybeRelaunchSelf(&argc, argv);
  if (!relaunch.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(relaunch.status().message()).c_str());
    return 2;
  }
  if (relaunch->relaunched) return relaunch->exit_code;
  std::vector<std::string> args;
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help = true;
      continue;
    }
    if (absl::StartsWith(a, "--config=")) a = "--config=" + ResolveUserPath(a.substr(9));
    args.push_back(a);
  }
  absl::Status parsed = LoadConfigFromArgs(args, job);
  if (help) {
    std::printf("%s\n\nFlags (current values):\n%s", usage.c_str(), DescribeConfig(*job).c_str());
    // Binaries that link no strategy (//models/gpt:sample) have none to list.
    const std::string strategies = DescribeRegisteredStrategies();
    if (!strategies.empty()) {
      std::printf("\nStrategies (--strategy) and their options "
                  "(--strategy_options=key=value,... or strategy.key=value):\n%s",
                  strategies.c_str());
    }
    return parsed.ok() ? 0 : 2;
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  absl::Status s = run();
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace weft
