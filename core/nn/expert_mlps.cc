#include "core/nn/expert_mlps.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/grouped_gemm.h"

namespace weft {

ExpertMlps::ExpertMlps(int num_experts, int64_t channels, int64_t hidden, float init_std,
                       float proj_init_std)
    : Module("ExpertMlps"), channels_(channels), hidden_(hidden) {
  const int64_t e = num_experts;
  fc_weight_ = RegisterParameter("fc_weight", {e, hidden, channels}, InitSpec::Normal(init_std),
                                 true);
  fc_bias_ = RegisterParameter("fc_bias", {e, hidden}, InitSpec::Zeros(), false);
  proj_weight_ = RegisterParameter("proj_weight", {e, channels, hidden},
                                   InitSpec::Normal(proj_init_std), true);
  proj_bias_ = RegisterParameter("proj_bias", {e, channels}, InitSpec::Zeros(), false);
}

absl::StatusOr<Tensor> ExpertMlps::Forward(RunContext&, const Tensor&) {
  return FailedPrecondition("ExpertMlps::Forward without group counts",
                            "ForwardGrouped(ctx, x, counts)", "call it through MoeLayer");
}

absl::StatusOr<Tensor> ExpertMlps::Backward(RunContext&, const Tensor&) {
  return FailedPrecondition("ExpertMlps::Backward without its grouped forward",
                            "BackwardGrouped(ctx, dy)", "call it through MoeLayer");
}

absl::StatusOr<Tensor> ExpertMlps::ForwardGrouped(RunContext& ctx, const Tensor& x,
                                                  const std::vector<int64_t>& counts) {
  if (static_cast<int>(counts.size()) != num_local_experts()) {
    return InvalidArgument(absl::StrCat(counts.size(), " group counts"),
                           absl::StrCat(num_local_experts(), " (one per local expert)"));
  }
  const int64_t m = x.dim(0);
  Tensor y;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/false, [&]() -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(Tensor pre, ctx.Empty({m, hidden_}, ctx.compute_dtype));
    WEFT_ASSIGN_OR_RETURN(Tensor h, ctx.Empty({m, hidden_}, ctx.compute_dtype));
    WEFT_ASSIGN_OR_RETURN(y, ctx.Empty({m, channels_}, ctx.compute_dtype));
    // (M, C) -> (M, H): GELU fused, the pre-activation kept for backward.
    WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, ctx.kernel(),
                                     {.kind = GroupedGemmKind::kForward, .out = h, .a = x,
                                      .w = fc_weight_->value, .epilogue = Epilogue::kBiasGelu,
                                      .bias = fc_bias_->value, .aux = pre},
                                     counts));
    // (M, H) -> (M, C)
    WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, ctx.kernel(),
                                     {.kind = GroupedGemmKind::kForward, .out = y, .a = h,
                                      .w = proj_weight_->value, .epilogue = Epilogue::kBias,
                                      .bias = proj_bias_->value},
                                     counts));
    if (ctx.training) {
      SavedActivations& saved = ctx.Saved(this);
      saved[kInput] = x;
      saved[kPreActivation] = pre;
      saved[kHidden] = h;
      WEFT_ASSIGN_OR_RETURN(saved[kCounts],
                            Tensor::FromVector<int64_t>(counts, {static_cast<int64_t>(counts.size())}));
    }
    return absl::OkStatus();
  }));
  return y;
}

absl::StatusOr<Tensor> ExpertMlps::BackwardGrouped(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr || !(*saved)[kInput].defined()) {
    return FailedPrecondition("ExpertMlps backward without saved input",
                              "ForwardGrouped in training mode before BackwardGrouped");
  }
  Tensor dx;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/true, [&]() -> absl::Status {
    const Tensor x = (*saved)[kInput], pre = (*saved)[kPreActivation], h = (*saved)[kHidden];
    WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> counts, (*saved)[kCounts].ToVector<int64_t>());
    const int64_t m = x.dim(0);
    const KernelContext k = ctx.kernel();
    // proj: dW += dy^T h, db += column sums of dy per expert.
    WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, k,
                                     {.kind = GroupedGemmKind::kWeightGrad,
                                      .out = proj_weight_->grad, .a = dy, .b = h},
                                     counts));
    int64_t begin = 0;
    for (size_t e = 0; e < counts.size(); ++e) {
      if (counts[e] > 0) {
        Tensor db = proj_bias_->grad.Select(0, e);
        WEFT_RETURN_IF_ERROR(ctx.ops->BiasGrad(k, db, dy.Slice(0, begin, begin + counts[e])));
      }
      begin += counts[e];
    }
    // d(fc pre-activation) = (dy . W_proj) * gelu'(pre), fc's bias gradient fused.
    WEFT_ASSIGN_OR_RETURN(Tensor dpre, ctx.Empty({m, hidden_}, ctx.compute_dtype));
    WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, k,
                                     {.kind = GroupedGemmKind::kInputGrad, .out = dpre, .a = dy,
                                      .w = proj_weight_->value, .epilogue = Epilogue::kDGelu,
                                      .aux = pre, .bias_grad = fc_bias_->grad},
                                     counts));
    WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, k,
                                     {.kind = GroupedGemmKind::kWeightGrad,
                                      .out = fc_weight_->grad, .a = dpre, .b = x},
                                     counts));
    WEFT_ASSIGN_OR_RETURN(dx, ctx.Empty({m, channels_}, ctx.compute_dtype));
    WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, k,
                                     {.kind = GroupedGemmKind::kInputGrad, .out = dx, .a = dpre,
                                      .w = fc_weight_->value},
                                     counts));
    return absl::OkStatus();
  }));
  ctx.DropSaved(this);
  return dx;
}

}  // namespace weft
