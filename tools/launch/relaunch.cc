#include "tools/launch/relaunch.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

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

  if (!parsed->saw_nproc_per_node || std::getenv("RANK") != nullptr) return RelaunchResult{};

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
