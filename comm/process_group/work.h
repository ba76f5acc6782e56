// Work: the handle every collective returns.
//
// Wait(timeout) returns the op's status. What it waits for depends on the
// device (see each op's contract in process_group.h):
//   CPU (gloo):  Wait blocks the calling thread until the op has finished;
//                then the op's buffers may be read and reused.
//   CUDA (nccl): Wait is stream-ordered and returns at once: it makes the
//                op's caller stream (options.stream) wait for the op's end, so
//                work queued there afterwards sees the results and the host
//                never blocks. Synchronize blocks the host instead.
// Either way Wait returns the group's error if the op (or an earlier one)
// failed. If Wait's own timeout expires first, it returns DeadlineExceeded
// and marks the group broken: this rank gave up on a collective its peers
// may still be in, so no later op can be trusted to line up.
//
// The op's own timeout (in its options) bounds how long it may run, so
// Wait() without a timeout still never hangs.
#ifndef WEFT_COMM_PROCESS_GROUP_WORK_H_
#define WEFT_COMM_PROCESS_GROUP_WORK_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/process_group/op_info.h"
#include "comm/process_group/op_observer.h"

namespace weft::comm {

class Work {
 public:
  explicit Work(OpInfo info) : info_(std::move(info)) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  [[nodiscard]] absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration());
  // Blocks the host until the op has finished on its device.
  [[nodiscard]] absl::Status Synchronize(absl::Duration timeout = absl::InfiniteDuration()) {
    return DoSynchronize(timeout);
  }
  // True once the op has finished (successfully or not); never blocks.
  virtual bool IsCompleted() const = 0;

  const OpInfo& info() const { return info_; }

  // Reports the op to `observer` when Wait is called (set by the group at
  // issue, before the caller sees the handle).
  void Observe(std::shared_ptr<OpObserver> observer, int64_t payload_bytes, int64_t issued_us);
  // When a host backend ran the op: {started, finished} in WallMicros.
  virtual std::optional<std::pair<int64_t, int64_t>> HostSpan() const { return std::nullopt; }

 protected:
  virtual absl::Status DoWait(absl::Duration timeout) = 0;
  virtual absl::Status DoSynchronize(absl::Duration timeout) = 0;

 private:
  const OpInfo info_;
  std::shared_ptr<OpObserver> observer_;
  int64_t payload_bytes_ = 0;
  int64_t issued_us_ = 0;
};

// Work completed by a host thread (the gloo worker) calling Complete().
class HostWork final : public Work {
 public:
  // `health` (may be null) is marked broken when a Wait gives up.
  HostWork(OpInfo info, std::shared_ptr<GroupHealth> health)
      : Work(std::move(info)), health_(std::move(health)) {}

  // Called by the backend when it starts running the op (for traces).
  void MarkStarted();
  void Complete(absl::Status status);
  bool IsCompleted() const override;
  std::optional<std::pair<int64_t, int64_t>> HostSpan() const override;

 protected:
  absl::Status DoWait(absl::Duration timeout) override;
  absl::Status DoSynchronize(absl::Duration timeout) override { return DoWait(timeout); }

 private:
  const std::shared_ptr<GroupHealth> health_;
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  absl::Status status_;
  int64_t started_us_ = 0;
  int64_t finished_us_ = 0;
};

// A Work that is already finished with `status`.
std::shared_ptr<Work> MakeCompletedWork(OpInfo info, absl::Status status);

}  // namespace weft::comm

#endif  // WEFT_COMM_PROCESS_GROUP_WORK_H_
