// OpWatchdog: the thread that watches a group's in-flight ops and reports
// the first failure: an op that errors, one still running at its deadline,
// an asynchronous communicator error, or a failure found elsewhere (a
// Synchronize that gave up). It makes no CUDA or NCCL call itself; it sees
// ops and the communicator through callbacks, so a CPU test can drive it
// with ops that never finish.
//
// Stop bounds shutdown: in-flight ops get until a deadline to finish, not
// their own timeouts, and Stop says whether any was left running (the
// caller then aborts the communicator rather than finalizing it).
#ifndef WEFT_COMM_NCCL_OP_WATCHDOG_H_
#define WEFT_COMM_NCCL_OP_WATCHDOG_H_

#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/process_group/op_info.h"
#include "comm/util/deadline.h"

namespace weft::comm {

class OpWatchdog {
 public:
  struct Op {
    OpInfo info;
    Deadline deadline;  // the op fails if it is still running then
    // Non-blocking: true once the op has finished on the device, false
    // while it runs, or an error.
    std::function<absl::StatusOr<bool>()> finished;
    // Called once the op has finished (drops its buffers); may be empty.
    std::function<void()> release;
  };

  struct Hooks {
    // The communicator's asynchronous error; OK while it is healthy.
    // Polled each period while ops are in flight.
    std::function<absl::Status()> comm_error;
    // A failure found outside the watchdog that still needs handling, or
    // OK. Polled each period.
    std::function<absl::Status()> group_error;
    // Called on the watchdog thread with each failure found (the caller
    // aborts the communicator); the ops in flight then are dropped.
    std::function<void(const absl::Status&)> on_failure;
  };

  // Starts the thread, which looks at the ops every `period`.
  OpWatchdog(Hooks hooks, absl::Duration period);
  ~OpWatchdog();  // Stop with no grace
  OpWatchdog(const OpWatchdog&) = delete;
  OpWatchdog& operator=(const OpWatchdog&) = delete;

  void Track(Op op);

  // Stops the thread, giving in-flight ops until `deadline` to finish.
  // True when none was left running. Returns by the deadline plus one
  // period (plus on_failure, if an op fails meanwhile).
  bool Stop(const Deadline& deadline);

 private:
  void Loop();
  // Releases finished ops; returns the first failure among `ops`.
  absl::Status Check(const std::list<std::shared_ptr<Op>>& ops);

  const Hooks hooks_;
  const absl::Duration period_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<std::shared_ptr<Op>> in_flight_;
  bool stopping_ = false;
  Deadline stop_deadline_ = Deadline::After(absl::InfiniteDuration());
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace weft::comm

#endif  // WEFT_COMM_NCCL_OP_WATCHDOG_H_
