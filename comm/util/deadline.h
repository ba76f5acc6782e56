// Deadline: a point on the monotonic clock that every blocking call in comm
// counts down to, so nested waits share one budget and a changed wall clock
// never stretches or cuts a timeout.
#ifndef WEFT_COMM_UTIL_DEADLINE_H_
#define WEFT_COMM_UTIL_DEADLINE_H_

#include <chrono>
#include <cstdint>

#include "absl/time/time.h"

namespace weft::comm {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `timeout` from now; an infinite or huge timeout saturates to ~100 years.
  static Deadline After(absl::Duration timeout) {
    const absl::Duration kMax = absl::Hours(24 * 365 * 100);
    if (timeout > kMax) timeout = kMax;
    if (timeout < absl::ZeroDuration()) timeout = absl::ZeroDuration();
    return Deadline(Clock::now() + absl::ToChronoNanoseconds(timeout));
  }

  bool Expired() const { return Clock::now() >= when_; }
  absl::Duration Remaining() const {
    const auto left = when_ - Clock::now();
    return left.count() <= 0 ? absl::ZeroDuration() : absl::FromChrono(left);
  }
  // Milliseconds left, rounded up and clamped for poll(2)/gloo (>= 0).
  int64_t RemainingMillis() const {
    const absl::Duration left = Remaining();
    return absl::ToInt64Milliseconds(left + absl::Microseconds(999));
  }
  int PollMillis() const {
    const int64_t ms = RemainingMillis();
    return ms > 1000 * 1000 * 1000 ? 1000 * 1000 * 1000 : static_cast<int>(ms);
  }
  Clock::time_point time_point() const { return when_; }

  friend bool operator<(const Deadline& a, const Deadline& b) { return a.when_ < b.when_; }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_UTIL_DEADLINE_H_
