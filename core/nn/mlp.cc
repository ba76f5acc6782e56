#include "core/nn/mlp.h"

#include "core/base/status_macros.h"

namespace weft {

Mlp::Mlp(int64_t channels, int64_t hidden, float init_std, float proj_init_std, float dropout)
    : Module("Mlp") {
  RegisterSwappableModule("fc", std::make_unique<Linear>(
                                    channels, hidden,
                                    Linear::Options{.gelu = true, .init_std = init_std}));
  RegisterSwappableModule("proj", std::make_unique<Linear>(
                                      hidden, channels,
                                      Linear::Options{.init_std = proj_init_std}));
  dropout_ = RegisterModule("dropout", std::make_unique<Dropout>(dropout));
}

absl::StatusOr<Tensor> Mlp::Forward(RunContext& ctx, const Tensor& x) {
  WEFT_ASSIGN_OR_RETURN(Tensor h, child("fc")->CallForward(ctx, x));
  WEFT_ASSIGN_OR_RETURN(Tensor y, child("proj")->CallForward(ctx, h));
  return dropout_->CallForward(ctx, y);
}

absl::StatusOr<Tensor> Mlp::Backward(RunContext& ctx, const Tensor& dy) {
  WEFT_ASSIGN_OR_RETURN(Tensor dproj, dropout_->CallBackward(ctx, dy));
  Linear* fc_linear = fc();
  Linear* proj_linear = proj();
  if (fc_linear != nullptr && proj_linear != nullptr) proj_linear->FuseGeluBackwardInto(fc_linear);
  WEFT_ASSIGN_OR_RETURN(Tensor dpre, child("proj")->CallBackward(ctx, dproj));
  return child("fc")->CallBackward(ctx, dpre);
}

}  // namespace weft
