// FakeComm: a communicator for CPU tests of AbortableComm and OpWatchdog. Its
// pending operation finishes only when told to, and it records whether two
// of its calls ever overlapped (AbortableComm must serialize them, as NCCL
// requires).
#ifndef WEFT_COMM_NCCL_FAKE_COMM_H_
#define WEFT_COMM_NCCL_FAKE_COMM_H_

#include <atomic>
#include <chrono>
#include <thread>

#include "comm/nccl/abortable_comm.h"

namespace weft::comm::testing {

class FakeComm {
 public:
  CommOps Ops() {
    return {
        .poll = [this]() -> absl::StatusOr<PollState> {
          Call call(this);
          ++polls;
          // Long enough for an overlapping call to be seen.
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          if (!error.load()) {
            return finished.load() ? PollState::kDone : PollState::kInProgress;
          }
          return absl::InternalError("remote rank failed");
        },
        .finalize = [this]() -> absl::Status {
          Call call(this);
          ++finalizes;
          return finalize_fails.load() ? absl::InternalError("finalize failed") : absl::OkStatus();
        },
        .destroy =
            [this] {
              Call call(this);
              ++destroys;
            },
        .abort =
            [this] {
              Call call(this);
              ++aborts;
            },
    };
  }

  std::atomic<bool> finished{false};  // the pending operation is done
  std::atomic<bool> error{false};     // poll reports an asynchronous error
  std::atomic<bool> finalize_fails{false};
  std::atomic<int> polls{0}, finalizes{0}, destroys{0}, aborts{0};
  std::atomic<bool> overlapped{false};

 private:
  struct Call {
    explicit Call(FakeComm* c) : comm(c) {
      if (comm->inside_.fetch_add(1) != 0) comm->overlapped = true;
    }
    ~Call() { comm->inside_.fetch_sub(1); }
    FakeComm* comm;
  };
  std::atomic<int> inside_{0};
};

}  // namespace weft::comm::testing

#endif  // WEFT_COMM_NCCL_FAKE_COMM_H_
