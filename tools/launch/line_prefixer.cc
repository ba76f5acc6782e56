#include "tools/launch/line_prefixer.h"

#include <unistd.h>

#include <cerrno>

namespace weft::launch {

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void LinePrefixer::Emit(absl::string_view line) {
  if (show_) {
    std::string out;
    out.reserve(prefix_.size() + line.size() + 1);
    out.append(prefix_);
    out.append(line.data(), line.size());
    out.push_back('\n');
    WriteAll(out_fd_, out);
  }
  if (keep_last_ > 0) {
    last_lines_.emplace_back(line);
    if (last_lines_.size() > keep_last_) last_lines_.pop_front();
  }
}

void LinePrefixer::Feed(absl::string_view data) {
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    if (nl == absl::string_view::npos) {
      partial_.append(data.data(), data.size());
      return;
    }
    if (partial_.empty()) {
      Emit(data.substr(0, nl));
    } else {
      partial_.append(data.data(), nl);
      Emit(partial_);
      partial_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LinePrefixer::Finish() {
  if (partial_.empty()) return;
  Emit(partial_);
  partial_.clear();
}

}  // namespace weft::launch
