#include "tools/prepare_data/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace weft::tools {

namespace {
constexpr int kWidth = 30;
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);
// Jobs that end sooner never show a bar.
constexpr auto kQuietFor = std::chrono::milliseconds(500);
}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, Unit unit, int64_t min_total)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      unit_(unit),
      enabled_(total >= min_total),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::Update(int64_t done) {
  done_ = std::min(done, total_);
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < kQuietFor) return;
  if (tty_) {
    if (now - last_draw_ < kRedrawEvery) return;
    last_draw_ = now;
    Draw(done_, false);
  } else {
    const int decile = static_cast<int>(10 * done_ / total_);
    // 100% is Finish's line.
    if (decile == last_decile_ || decile == 10) return;
    last_decile_ = decile;
    Draw(done_, false);
  }
}

void ProgressBar::Finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (drawn_) Draw(total_, true);
}

std::string ProgressBar::Amount(int64_t n) const {
  if (unit_ == Unit::kBytes) return absl::StrFormat("%.1f", n / 1e6);
  return absl::StrFormat("%d", n);
}

void ProgressBar::Draw(int64_t done, bool final) {
  drawn_ = true;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double fraction = static_cast<double>(done) / static_cast<double>(total_);
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(kWidth, ' ');
  std::fill(bar.begin(), bar.begin() + filled, '=');
  if (filled < kWidth) bar[filled] = '>';
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  const std::string rate_text = unit_ == Unit::kBytes ? absl::StrFormat("%.1f MB/s", rate / 1e6)
                                                      : absl::StrFormat("%.0f/s", rate);
  std::fprintf(stderr, "%s%-10s [%s] %3.0f%%  %s/%s%s  %s  %.1fs%s", tty_ ? "\r" : "",
               label_.c_str(), bar.c_str(), 100 * fraction, Amount(done).c_str(),
               Amount(total_).c_str(), unit_ == Unit::kBytes ? " MB" : "", rate_text.c_str(),
               seconds, (final || !tty_) ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace weft::tools
