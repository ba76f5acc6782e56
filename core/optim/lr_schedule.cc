#include "core/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {

absl::StatusOr<LrSchedule> LrSchedule::Create(float max_lr, float min_lr, int64_t warmup_steps,
                                              int64_t total_steps, const std::string& decay) {
  if (!(max_lr > 0) || min_lr < 0 || min_lr > max_lr) {
    return InvalidArgument(absl::StrCat("lr=", max_lr, " min_lr=", min_lr),
                           "0 <= min_lr <= lr and lr > 0");
  }
  if (warmup_steps < 0 || total_steps < 1) {
    return InvalidArgument(absl::StrCat("warmup_steps=", warmup_steps, " steps=", total_steps),
                           "warmup_steps >= 0 and steps >= 1");
  }
  Decay d;
  if (decay == "cosine") {
    d = Decay::kCosine;
  } else if (decay == "linear") {
    d = Decay::kLinear;
  } else if (decay == "constant") {
    d = Decay::kConstant;
  } else {
    return InvalidArgument(absl::StrCat("lr schedule '", decay, "'"),
                           "one of cosine, linear, constant");
  }
  return LrSchedule(max_lr, min_lr, warmup_steps, total_steps, d);
}

float LrSchedule::At(int64_t step) const {
  if (step <= warmup_) return max_lr_ * static_cast<float>(step) / static_cast<float>(warmup_);
  if (decay_ == Decay::kConstant || total_ <= warmup_) return max_lr_;
  // 0-based like llm.c: the first step after warmup decays from the peak.
  const float progress = std::clamp(
      static_cast<float>(step - 1 - warmup_) / static_cast<float>(total_ - warmup_), 0.f, 1.f);
  const float shape = decay_ == Decay::kCosine ? 0.5f * (1.f + std::cos(3.14159265358979f * progress))
                                               : 1.f - progress;
  return min_lr_ + shape * (max_lr_ - min_lr_);
}

}  // namespace weft
