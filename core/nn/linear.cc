#include "core/nn/linear.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

Linear::Linear(int64_t in_features, int64_t out_features, Options options)
    : Module("Linear"), in_(in_features), out_(out_features), options_(options) {
  weight_ = RegisterParameter("weight", {out_, in_}, InitSpec::Normal(options.init_std), true);
  if (options.bias) bias_ = RegisterParameter("bias", {out_}, InitSpec::Zeros(), false);
}

void Linear::FuseGeluBackwardInto(Linear* producer) { fuse_into_ = producer; }

absl::StatusOr<Tensor> Linear::Forward(RunContext& ctx, const Tensor& x) {
  if (x.dim(-1) != in_) {
    return InvalidArgument(absl::StrCat("input ", ShapeString(x.shape())),
                           absl::StrCat("last dimension ", in_));
  }
  const int64_t m = x.numel() / in_;
  Tensor x2 = x.View({m, in_});
  Shape out_shape = x.shape();
  out_shape.back() = out_;
  WEFT_ASSIGN_OR_RETURN(Tensor y, ctx.Empty({m, out_}, ctx.compute_dtype));
  GemmArgs g{.out = y, .a = x2, .b = weight_->value, .trans_b = true};
  Tensor pre;
  if (options_.gelu) {
    WEFT_ASSIGN_OR_RETURN(pre, ctx.Empty({m, out_}, ctx.compute_dtype));
    if (bias_ == nullptr) {
      return InvalidArgument("Linear with gelu but no bias", "bias=true with gelu=true");
    }
    g.epilogue = Epilogue::kBiasGelu;
    g.bias = bias_->value;
    g.aux = pre;
  } else if (bias_ != nullptr) {
    g.epilogue = Epilogue::kBias;
    g.bias = bias_->value;
  }
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(ctx.kernel(), g));
  if (ctx.training) {
    SavedActivations& saved = ctx.Saved(this);
    saved[kInput] = x2;
    saved[kPreActivation] = pre;
    saved.shape = out_shape;
  }
  return y.View(out_shape);
}

absl::StatusOr<Tensor> Linear::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr || !(*saved)[kInput].defined()) {
    return FailedPrecondition("Linear backward without saved input",
                              "Forward in training mode before Backward");
  }
  const Tensor x = (*saved)[kInput];
  const Tensor pre = (*saved)[kPreActivation];
  const int64_t m = x.dim(0);
  Tensor dpre = dy.View({m, out_});
  if (options_.gelu && !dy_is_preactivation_) {
    WEFT_ASSIGN_OR_RETURN(dpre, ctx.Empty({m, out_}, ctx.compute_dtype));
    WEFT_RETURN_IF_ERROR(ctx.ops->GeluBackward(ctx.kernel(), dpre, dy.View({m, out_}), pre));
  }
  // dW += dpre^T . x, now or at the schedule's W. The caller may reuse dy's
  // buffer (residual gradients accumulate in place): W gets its own copy.
  Tensor dw_a = dpre;
  if (ctx.defer_weight_grads && dpre.raw_data() == dy.raw_data()) {
    WEFT_ASSIGN_OR_RETURN(dw_a, ctx.Empty({m, out_}, dpre.dtype()));
    WEFT_RETURN_IF_ERROR(dw_a.CopyFrom(dpre, ctx.stream, /*async=*/true));
  }
  // The bias gradient (column sums of dpre) comes out of the same GEMM,
  // unless proj's fused GELU backward already wrote it.
  const bool bias_done = options_.gelu && dy_is_preactivation_;
  dy_is_preactivation_ = false;
  Parameter* const bias = bias_done ? nullptr : bias_;
  auto weight_grad = [ops = ctx.ops, k = ctx.kernel(), w = weight_, bias, dw_a, x]() {
    GemmArgs g{.out = w->grad, .a = dw_a, .b = x, .trans_a = true, .accumulate = true};
    if (bias != nullptr) g.a_col_sums = bias->grad;
    return ops->Gemm(k, g);
  };
  if (ctx.defer_weight_grads) {
    ctx.store().Defer(ctx.slot, std::move(weight_grad));
  } else {
    WEFT_RETURN_IF_ERROR(weight_grad());
  }
  // dx = dpre . W, or, fused, d(producer pre-activation) = (dpre . W) * gelu'(pre).
  WEFT_ASSIGN_OR_RETURN(Tensor dx, ctx.Empty({m, in_}, ctx.compute_dtype));
  GemmArgs g{.out = dx, .a = dpre, .b = weight_->value};
  // Fuse only when the producer's bias gradient is resident: sharding
  // strategies allocate a layer's gradients just before its own backward.
  SavedActivations* producer =
      fuse_into_ != nullptr ? ctx.FindSaved(fuse_into_) : nullptr;
  if (producer != nullptr && fuse_into_->bias_->grad.defined()) {
    g.epilogue = Epilogue::kDGelu;
    g.aux = (*producer)[kPreActivation];
    g.bias_grad = fuse_into_->bias_->grad;
    fuse_into_->dy_is_preactivation_ = true;
    fuse_into_ = nullptr;
  }
  fuse_into_ = nullptr;
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(ctx.kernel(), g));
  Shape in_shape = saved->shape;
  in_shape.back() = in_;
  ctx.DropSaved(this);
  return dx.View(in_shape);
}

}  // namespace weft
