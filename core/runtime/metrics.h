// MetricsLogger: one line per step on the console and one JSON object per
// line in --metrics_out, e.g.
//   {"step":12,"loss":2.3104,"lr":0.0006,"step_ms":41.2,"tokens_per_s":99420,...}
// Only rank 0 of a job writes (the caller decides by passing enabled).
#ifndef WEFT_CORE_RUNTIME_METRICS_H_
#define WEFT_CORE_RUNTIME_METRICS_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace weft {

class MetricsLogger {
 public:
  // `path` may be empty (console only). Fails if the file cannot be created.
  // A new run starts the file afresh; a run resumed at step `resumed_at`
  // (>= 0) keeps the lines of an existing file up to that step (those with
  // no step too: config, notes) and continues it, so the file holds one
  // history, without the steps the resumed run redoes.
  static absl::StatusOr<MetricsLogger> Open(const std::string& path, bool console, bool enabled,
                                            int64_t resumed_at = -1);

  MetricsLogger(MetricsLogger&& other) noexcept;
  MetricsLogger& operator=(MetricsLogger&&) = delete;
  MetricsLogger(const MetricsLogger&) = delete;
  ~MetricsLogger();

  // A record: ordered key/value pairs. Numbers are printed with enough
  // digits to compare runs bit for bit.
  struct Record {
    std::vector<std::pair<std::string, double>> numbers;
    std::vector<std::pair<std::string, std::string>> strings;
    Record& Add(std::string key, double value) {
      numbers.emplace_back(std::move(key), value);
      return *this;
    }
    Record& AddString(std::string key, std::string value) {
      strings.emplace_back(std::move(key), std::move(value));
      return *this;
    }
  };

  // `to_console` false: the file only (e.g. per-step lines while a progress
  // bar owns the terminal, or GPU samples every second).
  void Log(const Record& record, bool to_console = true);
  // Console-only line (rank 0).
  void Print(const std::string& line);
  // Where console lines go instead of stdout (e.g. above a progress bar).
  void set_console_sink(std::function<void(const std::string&)> sink) {
    console_sink_ = std::move(sink);
  }

  static std::string ToJson(const Record& record);

 private:
  MetricsLogger(FILE* file, bool console, bool enabled)
      : file_(file), console_(console), enabled_(enabled) {}

  FILE* file_ = nullptr;
  bool console_ = true;
  bool enabled_ = true;
  std::function<void(const std::string&)> console_sink_;
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_METRICS_H_
