// RunMetrics: one training run's metrics JSON lines (--metrics_out), as the
// report needs them: per-key series over steps, GPU samples over time, and
// the run's config.
#ifndef WEFT_TOOLS_REPORT_RUN_METRICS_H_
#define WEFT_TOOLS_REPORT_RUN_METRICS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::report {

using Series = std::vector<std::pair<double, double>>;  // (x, y), x ascending

struct RunMetrics {
  std::string name;    // shown in legends: the file name without .jsonl
  std::string config;  // the "config" record (text proto), if any
  // Step records: key -> (step, value); null values are left out.
  std::map<std::string, Series> by_step;
  // GPU samples (records with "gpu_util"): key -> (seconds since start, value).
  std::map<std::string, Series> by_time;

  const Series* Step(const std::string& key) const;
  const Series* Time(const std::string& key) const;
};

// Reads `path`; `name` empty: the file's base name without ".jsonl". An
// empty file is an error naming it (its report would be blank).
absl::StatusOr<RunMetrics> ReadRunMetrics(const std::string& path, const std::string& name = "");

// Distinct legend names for metrics files: each file's name without
// ".jsonl", led by as many of its directories as it takes to tell it from
// the others ("a/m" and "b/m" for /x/a/m.jsonl and /x/b/m.jsonl).
std::vector<std::string> RunLabels(const std::vector<std::string>& paths);
// The same from text (one JSON object per line; blank lines skipped).
absl::StatusOr<RunMetrics> ParseRunMetrics(const std::string& text, const std::string& name);

}  // namespace weft::report

#endif  // WEFT_TOOLS_REPORT_RUN_METRICS_H_
