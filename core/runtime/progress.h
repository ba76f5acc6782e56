// Progress: how far the job is, for the person watching rank 0.
//
// On a terminal it redraws one bar line in place:
//   [##########..........]  50/100  50% | eta 1m12s | loss 2.3104 | 41.2k tok/s
// When stdout is not a terminal (a log file, a pipe), under a launcher
// (mpirun gives ranks a pty but interleaves their output into one stream)
// or with --quiet it prints that information as plain lines about every
// tenth of the run instead, since carriage returns would garble a log. Other output (eval
// lines, notes) goes through Message, which keeps the bar below it.
#ifndef WEFT_CORE_RUNTIME_PROGRESS_H_
#define WEFT_CORE_RUNTIME_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace weft {

class Progress {
 public:
  enum class Mode { kOff, kBar, kLines };
  // kOff for ranks other than 0; kBar on a terminal unless quiet or
  // started by a launcher; else kLines.
  static Mode PickMode(bool rank0, bool is_tty, bool quiet, bool launched);
  // As above, `launched` read from this process's environment
  // (comm::StartedByLauncher).
  static Mode PickMode(bool rank0, bool is_tty, bool quiet);
  // Whether this process's stdout is a terminal.
  static bool StdoutIsTerminal();

  Progress(Mode mode, int64_t total_steps, FILE* out = stdout);

  // After step `step` (1-based); `elapsed_s` since training started.
  void Update(int64_t step, double loss, double tokens_per_s, double elapsed_s);
  void Message(const std::string& line);
  // Ends the bar's line.
  void Finish();

  Mode mode() const { return mode_; }
  // "1h02m", "3m07s", "12s".
  static std::string FormatDuration(double seconds);
  // The bar line without the carriage return, for tests.
  std::string BarLine(int64_t step, double loss, double tokens_per_s, double elapsed_s) const;

 private:
  const Mode mode_;
  const int64_t total_;
  const int64_t lines_every_;
  FILE* const out_;
  bool bar_drawn_ = false;
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_PROGRESS_H_
