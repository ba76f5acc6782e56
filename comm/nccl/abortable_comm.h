// AbortableComm: the communicator handle shared by the thread that launches
// ops and the watchdog that aborts them. It makes no NCCL call itself: the
// calls come in a CommOps table, so a CPU test can fake a communicator whose
// op never finishes.
//
// Abort never waits for a launch. A launching thread holds the handle's
// mutex for one short, non-blocking call at a time (an enqueue, one look at
// the async state), never across a wait, and its waits poll a flag that
// Abort sets before it takes the mutex. So Abort returns after at most one
// such call plus ncclCommAbort, however long the op timeout is. Once an
// abort is requested no call reaches the communicator again (ncclCommAbort
// frees it): Run and Await return Aborted instead.
#ifndef WEFT_COMM_NCCL_ABORTABLE_COMM_H_
#define WEFT_COMM_NCCL_ABORTABLE_COMM_H_

#include <atomic>
#include <functional>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/nccl/abortable_poll.h"
#include "comm/util/deadline.h"

namespace weft::comm {

// The NCCL calls AbortableComm makes on the communicator. Each must return
// promptly (the communicator is non-blocking) and tolerate a communicator
// that was never created.
struct CommOps {
  // One look at the communicator (ncclCommGetAsyncError): kDone when idle,
  // kInProgress while an init, enqueue or finalize is pending, or its error.
  std::function<absl::StatusOr<PollState>()> poll;
  // Starts flushing outstanding work (ncclCommFinalize).
  std::function<absl::Status()> finalize;
  // Frees a finalized communicator (ncclCommDestroy).
  std::function<void()> destroy;
  // Stops everything and frees the communicator (ncclCommAbort).
  std::function<void()> abort;
};

class AbortableComm {
 public:
  explicit AbortableComm(CommOps ops) : ops_(std::move(ops)) {}
  AbortableComm(const AbortableComm&) = delete;
  AbortableComm& operator=(const AbortableComm&) = delete;

  // Runs `call` (non-blocking NCCL calls on the communicator) under the
  // handle's mutex. Aborted, without running it, once an abort was requested.
  absl::Status Run(const std::function<absl::Status()>& call);

  // Waits until the communicator is idle: OK, its error, DeadlineExceeded,
  // or Aborted within a millisecond of an abort request. Holds the mutex
  // only while it polls.
  absl::Status Await(const Deadline& deadline);

  // One poll, for the watchdog: the communicator's asynchronous error, or OK
  // while it is healthy (busy or idle) or already aborted or closed.
  absl::Status AsyncError();

  // Requests the abort (Run and Await give up at once) and aborts the
  // communicator. Idempotent and thread-safe; never waits for an op.
  void Abort();
  bool abort_requested() const { return abort_requested_.load(std::memory_order_acquire); }

  // Finalizes and destroys the communicator, giving outstanding work until
  // `deadline`; aborts it instead when that runs out, finalize fails, or an
  // abort was requested. Returns true when it finalized cleanly. Nothing
  // reaches the communicator afterwards.
  bool Close(const Deadline& deadline);

 private:
  const CommOps ops_;
  std::atomic<bool> abort_requested_{false};
  std::mutex mu_;        // one call on the communicator at a time
  bool closed_ = false;  // aborted or destroyed (guarded by mu_)
};

}  // namespace weft::comm

#endif  // WEFT_COMM_NCCL_ABORTABLE_COMM_H_
