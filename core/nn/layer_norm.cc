#include "core/nn/layer_norm.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

LayerNorm::LayerNorm(int64_t features, float eps, NormKind kind)
    : Module(kind == NormKind::kRms ? "RmsNorm" : "LayerNorm"), c_(features), eps_(eps),
      kind_(kind), bias_(nullptr) {
  weight_ = RegisterParameter("weight", {c_}, InitSpec::Ones(), false);
  if (kind_ == NormKind::kLayer) bias_ = RegisterParameter("bias", {c_}, InitSpec::Zeros(), false);
}

absl::Status LayerNorm::Normalize(RunContext& ctx, const Tensor& x, Tensor& out, Tensor& mean,
                                  Tensor& rstd) {
  if (x.dim(-1) != c_) {
    return InvalidArgument(absl::StrCat("input ", ShapeString(x.shape())),
                           absl::StrCat("last dimension ", c_));
  }
  const int64_t rows = x.numel() / c_;
  if (kind_ == NormKind::kLayer) {
    WEFT_ASSIGN_OR_RETURN(mean, ctx.Empty({rows}, DType::kF32));
  }
  WEFT_ASSIGN_OR_RETURN(rstd, ctx.Empty({rows}, DType::kF32));
  WEFT_ASSIGN_OR_RETURN(out, ctx.Empty(x.shape(), ctx.compute_dtype));
  if (ctx.training) {
    SavedActivations& saved = ctx.Saved(this);
    saved[kInput] = x;
    saved[kMean] = mean;
    saved[kRstd] = rstd;
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> LayerNorm::Forward(RunContext& ctx, const Tensor& x) {
  Tensor out, mean, rstd;
  WEFT_RETURN_IF_ERROR(Normalize(ctx, x, out, mean, rstd));
  if (kind_ == NormKind::kRms) {
    Tensor no_residual;
    WEFT_RETURN_IF_ERROR(ctx.ops->RmsNormForward(ctx.kernel(), no_residual, out, rstd, x, Tensor(),
                                                 weight_->value, eps_));
    return out;
  }
  WEFT_RETURN_IF_ERROR(ctx.ops->LayerNormForward(ctx.kernel(), out, mean, rstd, x,
                                                 weight_->value, bias_->value, eps_));
  return out;
}

absl::StatusOr<std::pair<Tensor, Tensor>> LayerNorm::ForwardResidual(RunContext& ctx,
                                                                     const Tensor& a,
                                                                     const Tensor& b) {
  std::pair<Tensor, Tensor> result;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/false, [&]() -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(result.first, ctx.Empty(a.shape(), ctx.compute_dtype));
    Tensor mean, rstd;
    WEFT_RETURN_IF_ERROR(Normalize(ctx, result.first, result.second, mean, rstd));
    if (kind_ == NormKind::kRms) {
      return ctx.ops->RmsNormForward(ctx.kernel(), result.first, result.second, rstd, a, b,
                                     weight_->value, eps_);
    }
    return ctx.ops->ResidualLayerNormForward(ctx.kernel(), result.first, result.second, mean,
                                             rstd, a, b, weight_->value, bias_->value, eps_);
  }));
  return result;
}

absl::Status LayerNorm::Gradient(RunContext& ctx, const Tensor& dy, Tensor& dx,
                                 const Tensor& residual) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("LayerNorm backward without saved input",
                              "Forward in training mode before Backward");
  }
  if (kind_ == NormKind::kRms) {
    WEFT_RETURN_IF_ERROR(ctx.ops->RmsNormBackward(ctx.kernel(), dx, weight_->grad, dy,
                                                  (*saved)[kInput], weight_->value,
                                                  (*saved)[kRstd], residual));
  } else {
    WEFT_RETURN_IF_ERROR(ctx.ops->LayerNormBackward(
        ctx.kernel(), dx, weight_->grad, bias_->grad, dy, (*saved)[kInput], weight_->value,
        (*saved)[kMean], (*saved)[kRstd], residual));
  }
  ctx.DropSaved(this);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> LayerNorm::Backward(RunContext& ctx, const Tensor& dy) {
  WEFT_ASSIGN_OR_RETURN(Tensor dx, ctx.Empty(dy.shape(), ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(Gradient(ctx, dy, dx, Tensor()));
  return dx;
}

absl::StatusOr<Tensor> LayerNorm::BackwardResidual(RunContext& ctx, const Tensor& dy,
                                                   const Tensor& residual_grad) {
  Tensor dx;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/true, [&]() -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(dx, ctx.Empty(dy.shape(), ctx.compute_dtype));
    return Gradient(ctx, dy, dx, residual_grad);
  }));
  return dx;
}

absl::Status LayerNorm::BackwardAccumulate(RunContext& ctx, const Tensor& dy, Tensor& dx_accum) {
  return RunHooked(ctx, /*backward=*/true, [&] { return Gradient(ctx, dy, dx_accum, dx_accum); });
}

}  // namespace weft
