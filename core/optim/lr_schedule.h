// Learning-rate schedules: linear warmup, then cosine, linear or constant
// decay to min_lr at total_steps. Steps are 1-based (the first optimizer
// step is step 1), as in llm.c.
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
