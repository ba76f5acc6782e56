#include "comm/process_group/work.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "comm/process_group/flight_recorder.h"
#include "comm/util/deadline.h"

namespace weft::comm {

int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Work::Observe(std::shared_ptr<OpObserver> observer, int64_t payload_bytes, int64_t issued_us) {
  observer_ = std::move(observer);
  payload_bytes_ = payload_bytes;
  issued_us_ = issued_us;
}

absl::Status Work::Wait(absl::Duration timeout) {
  if (observer_ == nullptr) {
    absl::Status s = DoWait(timeout);
    if (info_.flight != nullptr) info_.flight->MarkWaited(s.ok());
    return s;
  }
  observer_->OnWaitBegin(info_);
  ObservedOp op;
  op.info = &info_;
  op.payload_bytes = payload_bytes_;
  op.issued_us = issued_us_;
  op.wait_begin_us = WallMicros();
  absl::Status s = DoWait(timeout);
  op.wait_end_us = WallMicros();
  if (auto span = HostSpan()) {
    op.started_us = span->first;
    op.finished_us = span->second;
  }
  op.ok = s.ok();
  if (info_.flight != nullptr) info_.flight->MarkWaited(s.ok());
  observer_->OnWaitEnd(op);
  return s;
}

void HostWork::MarkStarted() {
  std::lock_guard<std::mutex> lock(mu_);
  started_us_ = WallMicros();
  if (info().flight != nullptr) info().flight->MarkStarted();
}

std::optional<std::pair<int64_t, int64_t>> HostWork::HostSpan() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) return std::nullopt;
  // Ops completed without running (argument errors) have no start.
  return std::make_pair(started_us_ > 0 ? started_us_ : finished_us_, finished_us_);
}

void HostWork::Complete(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    finished_us_ = WallMicros();
    if (info().flight != nullptr) info().flight->MarkEnded(status.ok());
    status_ = std::move(status);
  }
  done_cv_.notify_all();
}

bool HostWork::IsCompleted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

absl::Status HostWork::DoWait(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (done_cv_.wait_until(lock, Deadline::After(timeout).time_point(), [&] { return done_; })) {
    return status_;
  }
  lock.unlock();
  absl::Status error = info().Error(
      absl::StatusCode::kDeadlineExceeded,
      absl::StrCat("Wait gave up after ", absl::FormatDuration(timeout),
                   " while the op was still queued or running"));
  if (health_ != nullptr) health_->MarkBroken(error);
  return error;
}

std::shared_ptr<Work> MakeCompletedWork(OpInfo info, absl::Status status) {
  auto work = std::make_shared<HostWork>(std::move(info), nullptr);
  work->Complete(std::move(status));
  return work;
}

}  // namespace weft::comm
