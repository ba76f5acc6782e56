#include "comm/process_group/work.h"

#include "absl/strings/str_cat.h"
#include "comm/util/deadline.h"

namespace weft::comm {

void HostWork::Complete(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
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
