// TraceWriter: one rank's events in the Chrome trace event format, which
// Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// The rank is the trace's process (pid = rank, named "rank N"); tracks are
// its threads: the training step's phases, one per process group's
// collectives, one per data loader worker. Only complete events ("X") are
// written, so begin and end always match. Files hold one event per line
// between a fixed header and footer; MergeTraceFiles relies on that to
// join ranks without re-parsing.
#ifndef WEFT_CORE_RUNTIME_TRACE_WRITER_H_
#define WEFT_CORE_RUNTIME_TRACE_WRITER_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace weft {

class TraceWriter {
 public:
  explicit TraceWriter(int rank) : rank_(rank) {}

  // Track ids used by the trainer.
  static constexpr int kStepTrack = 1;
  static constexpr int kPipelineTrack = 2;
  static constexpr int kFirstCommTrack = 10;
  static constexpr int kFirstLoaderTrack = 100;

  void NameTrack(int tid, const std::string& name);
  // A span on track `tid`; `args` is the inside of a JSON object
  // ("\"bytes\":4096,\"group\":\"dp\"") or empty. Thread-safe.
  void Add(int tid, const std::string& name, const std::string& category, int64_t ts_us,
           int64_t dur_us, const std::string& args = "");
  size_t num_events() const;

  // The whole trace as JSON text.
  std::string ToJson() const;
  // Writes to `path` through a temporary file and a rename, so a merging
  // rank never reads half a file.
  absl::Status Write(const std::string& path) const;

 private:
  const int rank_;
  mutable std::mutex mu_;
  std::map<int, std::string> track_names_;
  std::vector<std::string> events_;  // one JSON object each
};

// DIR/trace_rank<R>.json and DIR/trace_merged.json.
std::string RankTracePath(const std::string& dir, int rank);
std::string MergedTracePath(const std::string& dir);

// Joins per-rank traces written by TraceWriter into one file; each rank
// stays its own process, so Perfetto shows a track group per rank.
absl::Status MergeTraceFiles(const std::vector<std::string>& inputs, const std::string& output);

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_TRACE_WRITER_H_
