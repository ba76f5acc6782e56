#include "core/runtime/step_timer.h"

#include <algorithm>

#include "core/base/status_macros.h"
#include "core/runtime/nvtx_ranges.h"

namespace weft {

absl::string_view StepPartName(StepPart part) {
  switch (part) {
    case StepPart::kDataWait:
      return "data_wait";
    case StepPart::kForward:
      return "forward";
    case StepPart::kBackward:
      return "backward";
    case StepPart::kExposedComm:
      return "exposed_comm";
    case StepPart::kOptimizer:
      return "optimizer";
    case StepPart::kOther:
      return "other";
  }
  return "?";
}

double StepBreakdown::Sum() const {
  double s = 0;
  for (double v : ms) s += v;
  return s;
}

void StepTimer::BeginStep() {
  active_ = true;
  owner_ = std::this_thread::get_id();
  used_ = 0;
  part_after_.clear();
  stack_.assign(1, StepPart::kOther);
  error_ = absl::OkStatus();
  NvtxPush("step");
  Mark(StepPart::kOther);
}

void StepTimer::Mark(StepPart part_after) {
  if (!error_.ok() || !recording_) return;
  if (used_ == events_.size()) {
    absl::StatusOr<Event> e = Event::Create(stream_.device(), /*enable_timing=*/true);
    if (!e.ok()) {
      error_ = e.status();
      return;
    }
    events_.push_back(std::move(*e));
  }
  if (absl::Status s = events_[used_].Record(stream_); !s.ok()) {
    error_ = s;
    return;
  }
  part_after_.push_back(part_after);
  ++used_;
}

void StepTimer::Enter(StepPart part) {
  if (!InStepOnThisThread()) return;
  stack_.push_back(part);
  NvtxPush(StepPartName(part).data());
  Mark(part);
}

void StepTimer::Leave() {
  if (!InStepOnThisThread() || stack_.size() <= 1) return;
  stack_.pop_back();
  NvtxPop();
  Mark(stack_.back());
}

void StepTimer::MarkEnd() {
  if (!InStepOnThisThread()) return;
  Mark(StepPart::kOther);
  NvtxPop();  // "step"
  active_ = false;
}

absl::StatusOr<StepBreakdown> StepTimer::Finish(double step_ms, std::vector<PartSpan>* spans) {
  active_ = false;
  WEFT_RETURN_IF_ERROR(error_);
  StepBreakdown b;
  double at = 0;
  for (size_t i = 0; i + 1 < used_; ++i) {
    WEFT_ASSIGN_OR_RETURN(float dt, Event::ElapsedMs(events_[i], events_[i + 1]));
    const double d = std::max(0.0, static_cast<double>(dt));
    b.ms[static_cast<int>(part_after_[i])] += d;
    if (spans != nullptr && d > 0) spans->push_back({part_after_[i], at, d});
    at += d;
  }
  // What the marks do not cover is host overhead around them.
  b.ms[static_cast<int>(StepPart::kOther)] += std::max(0.0, step_ms - at);
  return b;
}

}  // namespace weft
