// LossScaler: the loss scale of fp16 mixed precision, kept as PyTorch's
// GradScaler (torch.amp / torch.cuda.amp) keeps it.
//
// fp16 has 5 exponent bits: gradients below 2^-24 flush to zero and those
// at or above 65520 round to inf. The trainer multiplies the loss's
// gradient by scale() so small gradients survive, divides it out again in
// the optimizer, and tells the scaler after every step whether any
// gradient came out inf or NaN:
//   - found_inf: the step is skipped (no optimizer update at all) and a
//     dynamic scale is multiplied by backoff_factor;
//   - growth_interval clean steps in a row: a dynamic scale is multiplied
//     by growth_factor, unless that would overflow f32 (then it stays).
// The arithmetic is ATen's amp_update_scale kernel's: an f32 scale times
// a double factor, rounded back to f32. No other clamp: like GradScaler,
// a scale that keeps backing off goes toward 0 (the trainer stops the run
// when it reaches 0, where no growth could bring it back).
// A static scale never changes, but overflowing steps are still skipped.
// Host-side state: the trainer reads the step's finite flag once per step
// (as GradScaler.step does with found_inf.item()).
#ifndef WEFT_CORE_OPTIM_LOSS_SCALER_H_
#define WEFT_CORE_OPTIM_LOSS_SCALER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace weft {

struct LossScalerConfig {
  bool dynamic = true;             // false: a static scale, init_scale forever
  float init_scale = 65536.0f;     // 2^16, GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps in a row before growing
};

// What a checkpoint saves to continue bitwise (GradScaler.state_dict's
// "scale" and "_growth_tracker").
struct LossScalerState {
  float scale = 65536.0f;
  // Clean steps since the last growth or backoff (always 0 when static).
  int64_t growth_tracker = 0;
};

class LossScaler {
 public:
  // InvalidArgument naming the --loss_scale* flag that is out of range.
  static absl::StatusOr<LossScaler> Create(const LossScalerConfig& config);

  // What this step's loss gradient is multiplied by.
  float scale() const { return state_.scale; }
  // The scale's inverse as GradScaler unscales with it:
  // float(1 / double(scale)).
  float inverse_scale() const;
  // Records the step whose gradients carried scale(): returns true when it
  // is to be skipped (found_inf), and moves the scale as described above.
  bool Update(bool found_inf);

  const LossScalerState& state() const { return state_; }
  // A checkpoint's state; a static scaler keeps its configured scale. A
  // count at or past this run's growth_interval (resumed under a shorter
  // one) becomes growth_interval - 1: the next clean step grows.
  absl::Status Restore(const LossScalerState& state);
  const LossScalerConfig& config() const { return config_; }
  // "dynamic 65536 (x2 after 2000 clean steps, x0.5 on overflow)" or
  // "static 1024": for the startup line.
  std::string Describe() const;

 private:
  explicit LossScaler(const LossScalerConfig& config) : config_(config) {
    state_.scale = config.init_scale;
  }

  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace weft

#endif  // WEFT_CORE_OPTIM_LOSS_SCALER_H_
