// Dropout (inverted). Masks come from Philox keyed by the step's dropout
// seed and this module's name, so forward, backward and recompute agree
// without storing a mask, and masks do not depend on the device.
// Identity when p == 0 or when evaluating.
#ifndef WEFT_CORE_NN_DROPOUT_H_
#define WEFT_CORE_NN_DROPOUT_H_

#include "core/nn/module.h"

namespace weft {

class Dropout : public Module {
 public:
  explicit Dropout(float p) : Module("Dropout"), p_(p) {}

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  float p() const { return p_; }

 private:
  uint64_t Seed(const RunContext& ctx) const;

  const float p_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_DROPOUT_H_
