#include "comm/nccl/abortable_poll.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"

namespace weft::comm {

absl::Status PollUntilDone(const std::function<absl::StatusOr<PollState>()>& poll,
                           const Deadline& deadline, const std::atomic<bool>& abort) {
  absl::Duration backoff = absl::Microseconds(20);
  while (true) {
    if (abort.load(std::memory_order_acquire)) {
      return absl::AbortedError("the communicator is being aborted (a failed op or a timeout)");
    }
    absl::StatusOr<PollState> state = poll();
    if (!state.ok()) return state.status();
    if (*state == PollState::kDone) return absl::OkStatus();
    if (deadline.Expired()) return absl::DeadlineExceededError("NCCL operation still in progress");
    absl::SleepFor(std::min(backoff, deadline.Remaining()));
    backoff = std::min(backoff * 2, absl::Milliseconds(1));
  }
}

}  // namespace weft::comm
