// Learning-rate schedules: linear warmup, then cosine, linear or constant
// decay toward min_lr. Steps are 1-based (the first optimizer step is step
// 1); the values are llm.c's and PyTorch's schedulers' for the same 0-based
// step: warmup step s gets lr * s / warmup, the first step after warmup gets
// the peak lr, and step s > warmup the decay at (s - 1 - warmup) /
// (total - warmup), so the last step is one decay step short of min_lr
// (tests/torch_reference_test checks a run against PyTorch step by step).
#ifndef WEFT_CORE_OPTIM_LR_SCHEDULE_H_
#define WEFT_CORE_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace weft {

class LrSchedule {
 public:
  enum class Decay { kCosine, kLinear, kConstant };

  static absl::StatusOr<LrSchedule> Create(float max_lr, float min_lr, int64_t warmup_steps,
                                           int64_t total_steps, const std::string& decay);

  float At(int64_t step) const;

 private:
  LrSchedule(float max_lr, float min_lr, int64_t warmup, int64_t total, Decay decay)
      : max_lr_(max_lr), min_lr_(min_lr), warmup_(warmup), total_(total), decay_(decay) {}

  float max_lr_, min_lr_;
  int64_t warmup_, total_;
  Decay decay_;
};

}  // namespace weft

#endif  // WEFT_CORE_OPTIM_LR_SCHEDULE_H_
