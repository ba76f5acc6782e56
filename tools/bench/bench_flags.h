// Flag handling shared by the benchmark binaries. Abseil's --help lists only
// the flags defined in a file named like the program (comm_main.cc for
// `comm`), so the benchmarks' --help listed none; this lists theirs.
#ifndef WEFT_TOOLS_BENCH_BENCH_FLAGS_H_
#define WEFT_TOOLS_BENCH_BENCH_FLAGS_H_

#include <string>

namespace weft::bench {

// Sets the usage text --help prints above the benchmark's flags, then
// parses the command line (exits on --help or an unknown flag).
void ParseBenchmarkFlags(int argc, char** argv, const char* usage);

// Exits with status 2 and "error: --<flag>=<value>; expected <expected>"
// unless `ok`: a benchmark refuses values it would loop on or misreport.
void RequireFlag(bool ok, const std::string& flag_and_value, const std::string& expected);

}  // namespace weft::bench

#endif  // WEFT_TOOLS_BENCH_BENCH_FLAGS_H_
