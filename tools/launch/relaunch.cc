#include "tools/launch/relaunch.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "tools/launch/launch_options.h"
#include "tools/launch/launcher.h"

namespace weft::launch {

absl::StatusOr<RelaunchResult> MaybeRelaunchSelf(int* argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + *argc);
  absl::StatusOr<ParsedLaunchArgs> parsed =
      ParseLaunchArgs(args, "launch_output", /*stop_at_first_positional=*/false);
  if (!parsed.ok()) return parsed.status();

  // Compact argv in place: keep argv[0] and the non-launcher arguments, in
  // order. `rest` is an ordered subsequence of `args`, so a two-pointer walk
  // finds them (equal strings are interchangeable).
  int kept = 1;
  size_t next = 0;
  for (int i = 1; i < *argc; ++i) {
    if (next < parsed->rest.size() && parsed->rest[next] == argv[i]) {
      argv[kept++] = argv[i];
      ++next;
    }
  }
  argv[kept] = nullptr;
  *argc = kept;

  if (!parsed->saw_nproc_per_node) return RelaunchResult{};
  if (const char* rank = std::getenv("RANK"); rank != nullptr) {
    // A worker (of this relaunch, or of tools/launch given the same flags)
    // has WORLD_SIZE = --nproc_per_node x --nnodes. Anything else is a RANK
    // left in the environment by another launcher or a shell, and dropping
    // --nproc_per_node would run the job with that launcher's world instead.
    const char* world = std::getenv("WORLD_SIZE");
    const std::string expected = absl::StrCat(parsed->options.world_size());
    if (world == nullptr || expected != world) {
      return FailedPrecondition(
          absl::StrCat("--nproc_per_node=", parsed->options.nproc_per_node,
                       " --nnodes=", parsed->options.nnodes, " asks for ", expected,
                       " ranks, but the environment already names this process a rank: RANK=",
                       rank, " WORLD_SIZE=", world == nullptr ? "(unset)" : world),
          absl::StrCat("either a launcher's variables with WORLD_SIZE=", expected,
                       ", or none (then --nproc_per_node starts the ranks)"),
          "unset RANK, WORLD_SIZE and LOCAL_RANK (left over from torchrun or a shell) to let "
          "--nproc_per_node launch the ranks, or drop --nproc_per_node under a launcher");
    }
    return RelaunchResult{};
  }

  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return Internal("cannot find this executable (/proc/self/exe) to relaunch it");
  self[n] = '\0';
  std::vector<std::string> command = {self};
  command.insert(command.end(), argv + 1, argv + kept);
  absl::StatusOr<int> code = Launch(parsed->options, command);
  if (!code.ok()) return code.status();
  return RelaunchResult{true, *code};
}

}  // namespace weft::launch
