#include "tools/report/run_metrics.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/errors.h"
#include "core/base/json.h"

namespace weft::report {

const Series* RunMetrics::Step(const std::string& key) const {
  auto it = by_step.find(key);
  return it == by_step.end() ? nullptr : &it->second;
}

const Series* RunMetrics::Time(const std::string& key) const {
  auto it = by_time.find(key);
  return it == by_time.end() ? nullptr : &it->second;
}

absl::StatusOr<RunMetrics> ParseRunMetrics(const std::string& text, const std::string& name) {
  RunMetrics run;
  run.name = name;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    absl::StatusOr<JsonValue> v = ParseJson(line);
    if (!v.ok() || !v->is_object()) {
      return InvalidArgument(
          absl::StrCat("line ", line_no, " of run '", name, "' is not a JSON object"),
          "one JSON object per line, as --metrics_out writes",
          v.ok() ? "" : std::string(v.status().message()));
    }
    if (const JsonValue* c = v->Find("config"); c != nullptr && c->is_string()) {
      run.config = c->string;
      continue;
    }
    const JsonValue* step = v->Find("step");
    const JsonValue* time = v->Find("time_s");
    const bool sample = v->Find("gpu_util") != nullptr && time != nullptr && time->is_number();
    if (!sample && (step == nullptr || !step->is_number())) continue;
    for (const auto& [key, value] : v->object) {
      if (!value.is_number() || key == "step" || key == "time_s") continue;
      if (sample) {
        run.by_time[key].push_back({time->number, value.number});
      } else {
        run.by_step[key].push_back({step->number, value.number});
      }
    }
  }
  for (auto* m : {&run.by_step, &run.by_time}) {
    for (auto& [key, series] : *m) std::stable_sort(series.begin(), series.end());
  }
  return run;
}

absl::StatusOr<RunMetrics> ReadRunMetrics(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  if (!in) {
    return NotFound(absl::StrCat("cannot open metrics file '", path, "'"),
                    "a JSON lines file written with --metrics_out=PATH");
  }
  std::stringstream text;
  text << in.rdbuf();
  if (absl::StripAsciiWhitespace(text.str()).empty()) {
    return InvalidArgument(absl::StrCat("metrics file '", path, "' is empty"),
                           "the JSON lines a run writes with --metrics_out=PATH",
                           "check the path, or whether that run stopped before it logged");
  }
  std::string n = name;
  if (n.empty()) {
    n = path.substr(path.find_last_of('/') + 1);
    if (absl::EndsWith(n, ".jsonl")) n.resize(n.size() - 6);
  }
  return ParseRunMetrics(text.str(), n);
}

std::vector<std::string> RunLabels(const std::vector<std::string>& paths) {
  std::vector<std::vector<std::string>> parts;  // each path's components
  for (std::string p : paths) {
    if (absl::EndsWith(p, ".jsonl")) p.resize(p.size() - 6);
    parts.push_back(absl::StrSplit(p, '/', absl::SkipEmpty()));
  }
  // The last k components of path i (all of them when it has fewer).
  auto suffix = [&](size_t i, size_t k) {
    const std::vector<std::string>& c = parts[i];
    return absl::StrJoin(c.end() - std::min(k, c.size()), c.end(), "/");
  };
  std::vector<std::string> labels;
  for (size_t i = 0; i < paths.size(); ++i) {
    size_t k = 1;
    auto clashes = [&] {
      for (size_t j = 0; j < paths.size(); ++j) {
        if (j != i && suffix(j, k) == suffix(i, k)) return true;
      }
      return false;
    };
    while (k < parts[i].size() && clashes()) ++k;
    // The whole path as given (with its leading '/') once nothing shorter will do.
    labels.push_back(k < parts[i].size() ? suffix(i, k)
                                         : std::string(absl::StripSuffix(paths[i], ".jsonl")));
  }
  // The same file twice: number the repeats.
  for (size_t i = 0; i < labels.size(); ++i) {
    int seen = 1;
    for (size_t j = 0; j < i; ++j) seen += labels[j] == labels[i];
    if (seen > 1) absl::StrAppend(&labels[i], " (", seen, ")");
  }
  return labels;
}

}  // namespace weft::report
