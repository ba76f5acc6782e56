#include "comm/nccl/op_watchdog.h"

#include "absl/strings/str_cat.h"

namespace weft::comm {

OpWatchdog::OpWatchdog(Hooks hooks, absl::Duration period)
    : hooks_(std::move(hooks)), period_(period), thread_([this] { Loop(); }) {}

OpWatchdog::~OpWatchdog() { Stop(Deadline::After(absl::ZeroDuration())); }

void OpWatchdog::Track(Op op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.push_back(std::make_shared<Op>(std::move(op)));
  }
  cv_.notify_all();
}

bool OpWatchdog::Stop(const Deadline& deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (deadline < stop_deadline_) stop_deadline_ = deadline;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_.empty();
}

void OpWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, absl::ToChronoNanoseconds(period_));
    if (stopping_ && (in_flight_.empty() || stop_deadline_.Expired())) return;
    const std::list<std::shared_ptr<Op>> snapshot = in_flight_;
    lock.unlock();
    const absl::Status failure = Check(snapshot);
    if (!failure.ok() && hooks_.on_failure) hooks_.on_failure(failure);
    lock.lock();
    if (!failure.ok()) in_flight_.clear();
  }
}

absl::Status OpWatchdog::Check(const std::list<std::shared_ptr<Op>>& ops) {
  const std::shared_ptr<Op>* running = nullptr;
  for (const std::shared_ptr<Op>& op : ops) {
    absl::StatusOr<bool> finished = op->finished();
    if (!finished.ok()) {
      return op->info.Error(absl::StatusCode::kInternal, finished.status().message());
    }
    if (*finished) {
      if (op->release) op->release();
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.remove(op);
      continue;
    }
    if (op->deadline.Expired()) {
      return op->info.Error(absl::StatusCode::kDeadlineExceeded,
                            "the op did not finish on the GPU within its timeout");
    }
    if (running == nullptr) running = &op;
  }
  if (running != nullptr && hooks_.comm_error) {
    if (absl::Status s = hooks_.comm_error(); !s.ok()) {
      return (*running)->info.Error(
          absl::StatusCode::kInternal,
          absl::StrCat("NCCL reported an asynchronous error: ", s.message()));
    }
  }
  return hooks_.group_error ? hooks_.group_error() : absl::OkStatus();
}

}  // namespace weft::comm
