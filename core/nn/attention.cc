#include "core/nn/attention.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

CausalSelfAttention::CausalSelfAttention(int64_t channels, int num_heads, float init_std,
                                         float proj_init_std, float dropout)
    : Module("CausalSelfAttention"), c_(channels), num_heads_(num_heads) {
  RegisterSwappableModule("qkv", std::make_unique<Linear>(
                                   channels, 3 * channels, Linear::Options{.init_std = init_std}));
  RegisterSwappableModule("proj", std::make_unique<Linear>(
                                     channels, channels, Linear::Options{.init_std = proj_init_std}));
  RegisterSwappableModule("dropout", std::make_unique<Dropout>(dropout));
  // Swappable: cp's ring attention takes over how tokens meet.
  RegisterSwappableModule("core", std::make_unique<CausalAttentionCore>(channels / num_heads));
}

absl::StatusOr<Tensor> CausalSelfAttention::Forward(RunContext& ctx, const Tensor& x) {
  if (x.ndim() != 3 || x.dim(2) != c_) {
    return InvalidArgument("attention input " + ShapeString(x.shape()),
                           absl::StrCat("(B, T, ", c_, ")"));
  }
  // A column-parallel qkv returns whole heads of this rank only (and a
  // sequence-parallel one the whole sequence): the core sizes from it.
  WEFT_ASSIGN_OR_RETURN(Tensor qkv_out, child("qkv")->CallForward(ctx, x));  // (B, T, 3C)
  WEFT_ASSIGN_OR_RETURN(Tensor att, child("core")->CallForward(ctx, qkv_out));
  WEFT_ASSIGN_OR_RETURN(Tensor y, child("proj")->CallForward(ctx, att));
  return child("dropout")->CallForward(ctx, y);
}

absl::StatusOr<Tensor> CausalSelfAttention::Backward(RunContext& ctx, const Tensor& dy) {
  WEFT_ASSIGN_OR_RETURN(Tensor dproj, child("dropout")->CallBackward(ctx, dy));
  WEFT_ASSIGN_OR_RETURN(Tensor datt, child("proj")->CallBackward(ctx, dproj));
  WEFT_ASSIGN_OR_RETURN(Tensor dqkv, child("core")->CallBackward(ctx, datt));
  return child("qkv")->CallBackward(ctx, dqkv);
}

}  // namespace weft
