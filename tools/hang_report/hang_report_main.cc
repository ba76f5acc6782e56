// bazel run //tools:hang_report -- DIR
//
// Reads every rank's flight recorder dump in DIR (rank_<r>.json, written on
// a failure, SIGTERM or SIGUSR2; the trainer prints where) and prints one
// line naming the rank, op and sequence number where the ranks diverged,
// then one line per rank. Exit status 0 when the dumps agree, 1 when they
// diverge, 2 on a usage or read error.
#include <cstdio>
#include <string>

#include "tools/hang_report/hang_analysis.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr,
                 "usage: hang_report DIR\n"
                 "  DIR: where the ranks wrote rank_<r>.json (--flight_dir; the default is\n"
                 "  $TMPDIR/weft_flight, else /tmp/weft_flight)\n");
    return 2;
  }
  absl::StatusOr<std::vector<weft::hang::RankDump>> dumps = weft::hang::ReadDumps(argv[1]);
  if (!dumps.ok()) {
    std::fprintf(stderr, "hang_report: %s\n", std::string(dumps.status().message()).c_str());
    return 2;
  }
  const weft::hang::Report r = weft::hang::Analyze(*dumps);
  std::printf("%s\n", r.verdict.c_str());
  for (const std::string& line : r.details) std::printf("  %s\n", line.c_str());
  return r.divergences.empty() && r.missing.empty() ? 0 : 1;
}
