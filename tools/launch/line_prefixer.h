// LinePrefixer: turns a worker's raw output stream into whole lines, each
// written with a prefix ("[rank 3] ") in one write(2), so lines of different
// ranks never interleave mid-line. It can also drop the lines (rank0 mode)
// while keeping the last few for a failure report.
#ifndef WEFT_TOOLS_LAUNCH_LINE_PREFIXER_H_
#define WEFT_TOOLS_LAUNCH_LINE_PREFIXER_H_

#include <cstddef>
#include <deque>
#include <string>

#include "absl/strings/string_view.h"

namespace weft::launch {

class LinePrefixer {
 public:
  // Writes to `out_fd` when `show`; keeps the last `keep_last` lines either way.
  LinePrefixer(std::string prefix, int out_fd, bool show, size_t keep_last = 20)
      : prefix_(std::move(prefix)), out_fd_(out_fd), show_(show), keep_last_(keep_last) {}

  void Feed(absl::string_view data);
  // Emits a trailing partial line (with a newline added).
  void Finish();
  const std::deque<std::string>& last_lines() const { return last_lines_; }

 private:
  void Emit(absl::string_view line);

  const std::string prefix_;
  const int out_fd_;
  const bool show_;
  const size_t keep_last_;
  std::string partial_;
  std::deque<std::string> last_lines_;
};

// write(2) all of `data` to `fd`, retrying on EINTR; errors are dropped
// (there is nowhere left to report them).
void WriteAll(int fd, absl::string_view data);

}  // namespace weft::launch

#endif  // WEFT_TOOLS_LAUNCH_LINE_PREFIXER_H_
