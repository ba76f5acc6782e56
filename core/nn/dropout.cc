#include "core/nn/dropout.h"

#include "core/base/status_macros.h"

namespace weft {

uint64_t Dropout::Seed(const RunContext& ctx) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the module path
  for (unsigned char c : name()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return ctx.dropout_seed ^ h;
}

absl::StatusOr<Tensor> Dropout::Forward(RunContext& ctx, const Tensor& x) {
  // Nothing is saved: the mask is recomputed from the seed in backward.
  if (!ctx.training || p_ == 0.f) return x;
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty(x.shape(), x.dtype()));
  WEFT_RETURN_IF_ERROR(ctx.ops->DropoutForward(ctx.kernel(), out, x, p_, Seed(ctx), 0));
  return out;
}

absl::StatusOr<Tensor> Dropout::Backward(RunContext& ctx, const Tensor& dy) {
  if (p_ == 0.f) return dy;
  WEFT_ASSIGN_OR_RETURN(Tensor dx, ctx.Empty(dy.shape(), dy.dtype()));
  WEFT_RETURN_IF_ERROR(ctx.ops->DropoutBackward(ctx.kernel(), dx, dy, p_, Seed(ctx), 0));
  return dx;
}

}  // namespace weft
