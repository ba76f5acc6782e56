#include "core/runtime/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/env/dist_env.h"

namespace weft {
namespace {

constexpr int kBarWidth = 20;

std::string Throughput(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return absl::StrFormat("%.2fM", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return absl::StrFormat("%.1fk", tokens_per_s / 1e3);
  return absl::StrFormat("%.0f", tokens_per_s);
}

}  // namespace

Progress::Mode Progress::PickMode(bool rank0, bool is_tty, bool quiet, bool launched) {
  if (!rank0) return Mode::kOff;
  return is_tty && !quiet && !launched ? Mode::kBar : Mode::kLines;
}

Progress::Mode Progress::PickMode(bool rank0, bool is_tty, bool quiet) {
  return PickMode(rank0, is_tty, quiet, comm::StartedByLauncher());
}

bool Progress::StdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1; }

Progress::Progress(Mode mode, int64_t total_steps, FILE* out)
    : mode_(mode),
      total_(std::max<int64_t>(1, total_steps)),
      lines_every_(std::max<int64_t>(1, total_ / 10)),
      out_(out) {}

std::string Progress::FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s / 60) % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrCat(s, "s");
}

std::string Progress::BarLine(int64_t step, double loss, double tokens_per_s,
                              double elapsed_s) const {
  const double frac = std::clamp(static_cast<double>(step) / total_, 0.0, 1.0);
  const int filled = static_cast<int>(frac * kBarWidth);
  const double eta = step > 0 ? elapsed_s / step * (total_ - step) : NAN;
  const int width = static_cast<int>(absl::StrCat(total_).size());
  return absl::StrFormat("[%s%s] %*d/%d %3d%% | eta %s | loss %.4f | %s tok/s",
                         std::string(filled, '#'), std::string(kBarWidth - filled, '.'), width,
                         step, total_, static_cast<int>(frac * 100), FormatDuration(eta), loss,
                         Throughput(tokens_per_s));
}

void Progress::Update(int64_t step, double loss, double tokens_per_s, double elapsed_s) {
  if (mode_ == Mode::kOff) return;
  if (mode_ == Mode::kBar) {
    // \r plus clear-to-end-of-line redraws in place.
    std::fprintf(out_, "\r%s\033[K", BarLine(step, loss, tokens_per_s, elapsed_s).c_str());
    bar_drawn_ = true;
  } else if (step == 1 || step % lines_every_ == 0 || step == total_) {
    std::fprintf(out_, "progress %s\n", BarLine(step, loss, tokens_per_s, elapsed_s).c_str());
  }
  std::fflush(out_);
}

void Progress::Message(const std::string& line) {
  if (mode_ == Mode::kOff) return;
  // Print over the bar; the next Update draws it again below.
  std::fprintf(out_, "%s%s\n", bar_drawn_ ? "\r\033[K" : "", line.c_str());
  std::fflush(out_);
}

void Progress::Finish() {
  if (mode_ == Mode::kBar && bar_drawn_) std::fprintf(out_, "\n");
  bar_drawn_ = false;
  std::fflush(out_);
}

}  // namespace weft
