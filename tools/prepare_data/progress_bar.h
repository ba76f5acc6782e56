// ProgressBar: a one-line progress report on stderr for long tool runs.
//
// On a terminal it redraws in place at most ten times a second
// ("[=====>    ]  52%  5.8/11.1 MB  3.2 MB/s"); into a log it prints a line
// per 10%. Small jobs (total below `min_total`) and jobs that finish within
// half a second print nothing.
#ifndef WEFT_TOOLS_PREPARE_DATA_PROGRESS_BAR_H_
#define WEFT_TOOLS_PREPARE_DATA_PROGRESS_BAR_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace weft::tools {

class ProgressBar {
 public:
  enum class Unit { kBytes, kCount };

  ProgressBar(std::string label, int64_t total, Unit unit, int64_t min_total);
  ~ProgressBar() { Finish(); }

  void Update(int64_t done);
  // Draws 100% and ends the line (idempotent).
  void Finish();

 private:
  void Draw(int64_t done, bool final);
  std::string Amount(int64_t n) const;

  const std::string label_;
  const int64_t total_;
  const Unit unit_;
  const bool enabled_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  int last_decile_ = -1;
  int64_t done_ = 0;
  bool finished_ = false;
  bool drawn_ = false;
};

}  // namespace weft::tools

#endif  // WEFT_TOOLS_PREPARE_DATA_PROGRESS_BAR_H_
