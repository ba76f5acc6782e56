#include "comm/nccl/abortable_comm.h"

namespace weft::comm {
namespace {

absl::Status AbortedStatus() {
  return absl::AbortedError("the communicator was aborted (a failed op or a timeout) or closed");
}

}  // namespace

absl::Status AbortableComm::Run(const std::function<absl::Status()>& call) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || abort_requested()) return AbortedStatus();
  return call();
}

absl::Status AbortableComm::Await(const Deadline& deadline) {
  return PollUntilDone(
      [this]() -> absl::StatusOr<PollState> {
        std::lock_guard<std::mutex> lock(mu_);
        // The flag may have been set after PollUntilDone looked at it.
        if (closed_ || abort_requested()) return AbortedStatus();
        return ops_.poll();
      },
      deadline, abort_requested_);
}

absl::Status AbortableComm::AsyncError() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || abort_requested()) return absl::OkStatus();
  absl::StatusOr<PollState> state = ops_.poll();
  return state.ok() ? absl::OkStatus() : state.status();
}

void AbortableComm::Abort() {
  // Before the mutex: a thread in Await lets go within one poll period.
  abort_requested_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  ops_.abort();
  closed_ = true;
}

bool AbortableComm::Close(const Deadline& deadline) {
  bool finalizing = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    if (!abort_requested() && !deadline.Expired()) finalizing = ops_.finalize().ok();
  }
  if (finalizing && Await(deadline).ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;  // aborted by another thread meanwhile
    ops_.destroy();
    closed_ = true;
    return true;
  }
  Abort();
  return false;
}

}  // namespace weft::comm
