// Waiting for a non-blocking NCCL communicator, without NCCL: a poll loop
// with exponential backoff that ends when the operation finishes, fails,
// runs past its deadline, or another thread requests an abort.
//
// The abort flag is what keeps the watchdog's abort prompt: a thread waiting
// for a stuck enqueue (for up to the op timeout) notices the flag within one
// backoff period (at most 1 ms) and returns, so the aborting thread gets the
// communicator without waiting out the timeout.
#ifndef WEFT_COMM_NCCL_ABORTABLE_POLL_H_
#define WEFT_COMM_NCCL_ABORTABLE_POLL_H_

#include <atomic>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/util/deadline.h"

namespace weft::comm {

enum class PollState { kDone, kInProgress };

// Calls `poll` until it returns kDone (OkStatus) or an error (returned as
// is). DeadlineExceeded when `deadline` passes first; Aborted when `abort`
// becomes true first.
absl::Status PollUntilDone(const std::function<absl::StatusOr<PollState>()>& poll,
                           const Deadline& deadline, const std::atomic<bool>& abort);

}  // namespace weft::comm

#endif  // WEFT_COMM_NCCL_ABORTABLE_POLL_H_
