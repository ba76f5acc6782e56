// The launcher binary:
//   bazel run //tools:launch -- --nproc_per_node=N [--nnodes=M --node_rank=R
//       --master_addr=A --master_port=P] [--output=prefix|rank0|raw] -- <program> <args>
// See launch_options.h for the flags and launcher.h for what it does.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/launch/launch_options.h"
#include "tools/launch/launcher.h"

namespace {

constexpr char kUsage[] =
    "usage: launch --nproc_per_node=N [--nnodes=M --node_rank=R --master_addr=A "
    "--master_port=P]\n"
    "              [--output=prefix|rank0|raw] [--teardown_grace_s=S] [--stop_grace_s=S]\n"
    "              -- <program> [args...]\n"
    "Starts N local workers with the torchrun environment (RANK, LOCAL_RANK, WORLD_SIZE,\n"
    "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), forwards signals, stops every worker\n"
    "when one fails and exits with that worker's code.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  auto parsed = weft::launch::ParseLaunchArgs(args, "output", /*stop_at_first_positional=*/true);
  if (!parsed.ok()) {
    std::fprintf(stderr, "launch: %s\n%s", parsed.status().ToString().c_str(), kUsage);
    return 2;
  }
  if (!parsed->saw_nproc_per_node || parsed->rest.empty()) {
    std::fprintf(stderr, "launch: need --nproc_per_node and a program\n%s", kUsage);
    return 2;
  }
  // Under `bazel run` the launcher starts in its runfiles tree; run the job
  // from where the user typed the command, so relative paths mean the same.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (::chdir(dir) != 0) std::fprintf(stderr, "launch: cannot cd to %s\n", dir);
  }
  auto code = weft::launch::Launch(parsed->options, parsed->rest);
  if (!code.ok()) {
    std::fprintf(stderr, "launch: %s\n", code.status().ToString().c_str());
    // Flags that do not fit together are usage errors (2), as for the
    // trainers; a launch that fails (a port in use) is 1.
    return code.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return *code;
}
