#include "core/optim/loss_scaler.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {
namespace {

bool FiniteAbove(double v, double lo) { return std::isfinite(v) && v > lo; }  // NaN fails

}  // namespace

absl::StatusOr<LossScaler> LossScaler::Create(const LossScalerConfig& c) {
  if (!FiniteAbove(c.init_scale, 0)) {
    return InvalidArgument(
        absl::StrCat(c.dynamic ? "--loss_scale_init=" : "--loss_scale=", c.init_scale),
        "a finite scale > 0", "fp16 training usually starts at 65536 (2^16)");
  }
  if (!c.dynamic) return LossScaler(c);
  if (!FiniteAbove(c.growth_factor, 1)) {
    return InvalidArgument(absl::StrCat("--loss_scale_growth_factor=", c.growth_factor),
                           "a finite factor > 1", "the usual is 2");
  }
  if (!(c.backoff_factor > 0 && c.backoff_factor < 1)) {
    return InvalidArgument(absl::StrCat("--loss_scale_backoff=", c.backoff_factor),
                           "a factor in (0, 1)", "the usual is 0.5");
  }
  if (c.growth_interval < 1) {
    return InvalidArgument(absl::StrCat("--loss_scale_growth_interval=", c.growth_interval),
                           "at least 1 clean step", "the usual is 2000");
  }
  return LossScaler(c);
}

float LossScaler::inverse_scale() const {
  return static_cast<float>(1.0 / static_cast<double>(state_.scale));
}

bool LossScaler::Update(bool found_inf) {
  if (!config_.dynamic) return found_inf;
  if (found_inf) {
    state_.scale = static_cast<float>(static_cast<double>(state_.scale) * config_.backoff_factor);
    state_.growth_tracker = 0;
    return true;
  }
  // This step was clean: it counts before the comparison, as in ATen.
  const int64_t clean = state_.growth_tracker + 1;
  if (clean == config_.growth_interval) {
    const float grown =
        static_cast<float>(static_cast<double>(state_.scale) * config_.growth_factor);
    if (std::isfinite(grown)) state_.scale = grown;  // never past f32's range
    state_.growth_tracker = 0;
  } else {
    state_.growth_tracker = clean;
  }
  return false;
}

absl::Status LossScaler::Restore(const LossScalerState& s) {
  if (!config_.dynamic) return absl::OkStatus();
  if (!(std::isfinite(s.scale) && s.scale > 0) || s.growth_tracker < 0) {
    return InvalidArgument(
        absl::StrCat("a saved loss scale ", s.scale, " with ", s.growth_tracker, " clean steps"),
        "a finite scale > 0 and a clean-step count >= 0", "the checkpoint may be damaged");
  }
  state_ = s;
  // Resumed under a shorter --loss_scale_growth_interval: the next clean
  // step grows (a count past the interval would never equal it again).
  if (state_.growth_tracker >= config_.growth_interval) {
    state_.growth_tracker = config_.growth_interval - 1;
  }
  return absl::OkStatus();
}

std::string LossScaler::Describe() const {
  if (!config_.dynamic) return absl::StrCat("static ", config_.init_scale);
  return absl::StrCat("dynamic ", state_.scale, " (x", config_.growth_factor, " after ",
                      config_.growth_interval, " clean steps, x", config_.backoff_factor,
                      " on overflow)");
}

}  // namespace weft
