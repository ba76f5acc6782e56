#include "tools/bench/bench_flags.h"

#include <cstdio>
#include <cstdlib>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace weft::bench {

void ParseBenchmarkFlags(int argc, char** argv, const char* usage) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  // Flags defined in weft's benchmark sources, not Abseil's own.
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "tools/bench/") || absl::StrContains(file, "_benchmark.cc");
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  absl::ParseCommandLine(argc, argv);
}

void RequireFlag(bool ok, const std::string& flag_and_value, const std::string& expected) {
  if (ok) return;
  std::fprintf(stderr, "error: --%s; expected %s\n", flag_and_value.c_str(), expected.c_str());
  std::exit(2);
}

}  // namespace weft::bench
