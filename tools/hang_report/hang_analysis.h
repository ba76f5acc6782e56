// The analysis behind //tools:hang_report: every rank's flight recorder dump
// (comm/process_group/flight_recorder.h) in, and where the ranks diverged
// out. Per group (its name and ranks) it walks the collectives by sequence
// number and finds the first one the members do not agree on:
//   - skipped: a rank never issued #k, yet issued later ops on the group;
//   - behind: a rank never got to #k while the others issued it (it is stuck
//     elsewhere: CPU-side, or in another group, which its last op names);
//   - mismatch: the ranks issued #k with different ops or sizes (the
//     minority is named);
//   - stuck: every member issued #k and it never ended (network, backend).
// "Behind" and "stuck" need the op to have waited a second before the dumps,
// so a SIGUSR2 snapshot of a healthy run, taken a little apart on each rank,
// does not read as a hang.
// Across groups the verdict is the divergence whose op was issued first.
#ifndef WEFT_TOOLS_HANG_REPORT_HANG_ANALYSIS_H_
#define WEFT_TOOLS_HANG_REPORT_HANG_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::hang {

struct DumpedOp {
  std::string group;
  std::vector<int> ranks;
  int64_t seq = 0;
  bool point_to_point = false;
  std::string op, detail, fingerprint, state;
  int64_t issued_us = 0, started_us = 0, ended_us = 0;
  bool ended() const { return state == "completed" || state == "failed" || state == "waited"; }
};

struct RankDump {
  int rank = 0;
  int world_size = 1;
  std::string reason;
  std::string host;
  int64_t dumped_us = 0;
  std::vector<DumpedOp> ops;  // oldest first
};

// One dump file's text; `what` names it in errors.
absl::StatusOr<RankDump> ParseDump(const std::string& text, const std::string& what);
// Every rank_<r>.json in `dir`; an error when there is none.
absl::StatusOr<std::vector<RankDump>> ReadDumps(const std::string& dir);

struct Divergence {
  enum class Kind { kSkipped, kBehind, kMismatch, kStuck };
  Kind kind = Kind::kBehind;
  std::string group;        // "'world' (ranks 0-3)"
  int64_t seq = 0;
  std::string op;           // the op the majority issued at seq
  std::vector<int> culprits;  // the ranks named as the cause
  std::vector<int> others;    // the ranks that did what the culprits did not
  int64_t issued_us = 0;      // when the others issued it
  std::string line;           // the whole finding in one line
};

struct Report {
  std::vector<int> missing;             // ranks of the job with no dump
  std::vector<Divergence> divergences;  // by issue time, earliest first
  std::string verdict;                  // one line
  std::vector<std::string> details;     // per rank: why it dumped, its last op
};

Report Analyze(const std::vector<RankDump>& dumps);

}  // namespace weft::hang

#endif  // WEFT_TOOLS_HANG_REPORT_HANG_ANALYSIS_H_
