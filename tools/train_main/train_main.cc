#include "core/runtime/train_main.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "core/runtime/config_loader.h"

namespace weft {

std::string ResolveUserPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  return cwd != nullptr ? std::string(cwd) + "/" + path : path;
}

int TrainMain(int argc, char** argv, const std::string& usage, google::protobuf::Message* job,
              const std::function<absl::Status()>& run) {
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
