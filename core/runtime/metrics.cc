#include "core/runtime/metrics.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"
#include "core/base/json.h"

namespace weft {

namespace {

// The lines of the file at `path` (none if it does not exist) that a run
// resumed at `step` keeps.
std::string HistoryThrough(const std::string& path, int64_t step) {
  std::ifstream in(path);
  std::string kept, line;
  while (std::getline(in, line)) {
    absl::StatusOr<JsonValue> v = ParseJson(line);
    const JsonValue* s = v.ok() && v->is_object() ? v->Find("step") : nullptr;
    if (s != nullptr && s->is_number() && s->number > static_cast<double>(step)) continue;
    absl::StrAppend(&kept, line, "\n");
  }
  return kept;
}

}  // namespace

absl::StatusOr<MetricsLogger> MetricsLogger::Open(const std::string& path, bool console,
                                                  bool enabled, int64_t resumed_at) {
  FILE* f = nullptr;
  if (enabled && !path.empty()) {
    const std::string history = resumed_at >= 0 ? HistoryThrough(path, resumed_at) : "";
    f = std::fopen(path.c_str(), "w");
    if (f != nullptr && !history.empty()) {
      std::fwrite(history.data(), 1, history.size(), f);
      std::fflush(f);
    }
    if (f == nullptr) {
      return FailedPrecondition(absl::StrCat("cannot create metrics file '", path,
                                             "': ", std::strerror(errno)),
                                "a writable path for --metrics_out");
    }
  }
  return MetricsLogger(f, console, enabled);
}

MetricsLogger::MetricsLogger(MetricsLogger&& o) noexcept
    : file_(o.file_),
      console_(o.console_),
      enabled_(o.enabled_),
      console_sink_(std::move(o.console_sink_)) {
  o.file_ = nullptr;
}

MetricsLogger::~MetricsLogger() {
  if (file_ != nullptr) std::fclose(file_);
}

std::string MetricsLogger::ToJson(const Record& r) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : r.numbers) {
    absl::StrAppend(&out, first ? "" : ",", "\"", k, "\":");
    if (!std::isfinite(v)) {
      absl::StrAppend(&out, "null");
    } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
      absl::StrAppend(&out, absl::StrFormat("%.0f", v));
    } else {
      absl::StrAppend(&out, absl::StrFormat("%.9g", v));
    }
    first = false;
  }
  for (const auto& [k, v] : r.strings) {
    absl::StrAppend(&out, first ? "" : ",", "\"", k, "\":\"", JsonEscape(v), "\"");
    first = false;
  }
  return out + "}";
}

void MetricsLogger::Log(const Record& r, bool to_console) {
  if (!enabled_) return;
  if (file_ != nullptr) {
    std::fprintf(file_, "%s\n", ToJson(r).c_str());
    std::fflush(file_);
  }
  if (console_ && to_console) {
    std::string line;
    for (const auto& [k, v] : r.numbers) {
      // Unknown (NaN: e.g. mfu without a known peak) reads "-", never "nan";
      // the JSON keeps null.
      absl::StrAppend(&line, line.empty() ? "" : " | ", k, " ",
                      !std::isfinite(v)                           ? std::string("-")
                      : std::fabs(v) >= 1e5 || v == std::floor(v) ? absl::StrFormat("%.0f", v)
                                                                  : absl::StrFormat("%.6g", v));
    }
    for (const auto& [k, v] : r.strings) absl::StrAppend(&line, " | ", k, " ", v);
    Print(line);
  }
}

void MetricsLogger::Print(const std::string& line) {
  if (!enabled_ || !console_) return;
  if (console_sink_) {
    console_sink_(line);
    return;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace weft
