#include "core/nn/mlp.h"

#include "core/base/status_macros.h"

namespace weft {

Mlp::Mlp(int64_t channels, int64_t hidden, float init_std, float proj_init_std, float dropout)
    : Module("Mlp") {
  fc_ = RegisterModule("fc", std::make_unique<Linear>(
                                 channels, hidden,
                                 Linear::Options{.gelu = true, .init_std = init_std}));
  proj_ = RegisterModule("proj", std::make_unique<Linear>(
                                     hidden, channels, Linear::Options{.init_std = proj_init_std}));
  dropout_ = RegisterModule("dropout", std::make_unique<Dropout>(dropout));
}

absl::StatusOr<Tensor> Mlp::Forward(RunContext& ctx, const Tensor& x) {
  WEFT_ASSIGN_OR_RETURN(Tensor h, fc_->CallForward(ctx, x));
  WEFT_ASSIGN_OR_RETURN(Tensor y, proj_->CallForward(ctx, h));
  return dropout_->CallForward(ctx, y);
}

absl::StatusOr<Tensor> Mlp::Backward(RunContext& ctx, const Tensor& dy) {
  WEFT_ASSIGN_OR_RETURN(Tensor dproj, dropout_->CallBackward(ctx, dy));
  proj_->FuseGeluBackwardInto(fc_);
  WEFT_ASSIGN_OR_RETURN(Tensor dpre, proj_->CallBackward(ctx, dproj));
  return fc_->CallBackward(ctx, dpre);
}

}  // namespace weft
