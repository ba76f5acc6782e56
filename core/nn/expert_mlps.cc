#include "core/nn/expert_mlps.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/grouped_gemm.h"

namespace weft {
namespace {

std::vector<int64_t> RunCounts(const std::vector<int64_t>& counts, int run, int l) {
  return std::vector<int64_t>(counts.begin() + run * l, counts.begin() + (run + 1) * l);
}

std::vector<int> InOrder(int runs) {
  std::vector<int> order(runs);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

}  // namespace

ExpertMlps::ExpertMlps(int num_experts, int64_t channels, int64_t hidden, float init_std,
                       float proj_init_std, ExpertActivation activation)
    : Module("ExpertMlps"), channels_(channels), activation_(activation) {
  const int64_t e = num_experts;
  if (activation == ExpertActivation::kSwiGlu) {
    in_weight_ = RegisterParameter("gate_up_weight", {e, 2, hidden, channels},
                                   InitSpec::Normal(init_std), true);
    out_weight_ = RegisterParameter("down_weight", {e, channels, hidden},
                                    InitSpec::Normal(proj_init_std), true);
    hidden_dim_ = 2;
    return;
  }
  in_weight_ = RegisterParameter("fc_weight", {e, hidden, channels}, InitSpec::Normal(init_std),
                                 true);
  in_bias_ = RegisterParameter("fc_bias", {e, hidden}, InitSpec::Zeros(), false);
  out_weight_ = RegisterParameter("proj_weight", {e, channels, hidden},
                                  InitSpec::Normal(proj_init_std), true);
  out_bias_ = RegisterParameter("proj_bias", {e, channels}, InitSpec::Zeros(), false);
  hidden_dim_ = 1;
}

std::vector<Parameter*> ExpertMlps::expert_parameters() const {
  if (activation_ == ExpertActivation::kSwiGlu) return {in_weight_, out_weight_};
  return {in_weight_, in_bias_, out_weight_, out_bias_};
}

std::vector<ExpertMlps::HiddenSplit> ExpertMlps::HiddenSplits() const {
  std::vector<HiddenSplit> out = {{in_weight_, hidden_dim_}};
  if (in_bias_ != nullptr) out.push_back({in_bias_, 1});
  out.push_back({out_weight_, 2});
  return out;
}

Tensor ExpertMlps::Grouped(const Tensor& t) {
  if (t.ndim() == 3) return t;
  return t.View({t.dim(0), t.numel() / (t.dim(0) * t.dim(-1)), t.dim(-1)});  // (E, 2, H, C)
}

absl::StatusOr<Tensor> ExpertMlps::Forward(RunContext&, const Tensor&) {
  return FailedPrecondition("ExpertMlps::Forward without group counts",
                            "ForwardGrouped(ctx, x, counts)", "call it through MoeLayer");
}

absl::StatusOr<Tensor> ExpertMlps::Backward(RunContext&, const Tensor&) {
  return FailedPrecondition("ExpertMlps::Backward without its grouped forward",
                            "BackwardGrouped(ctx, dy)", "call it through MoeLayer");
}

absl::StatusOr<std::vector<int64_t>> ExpertMlps::RunStarts(
    const std::vector<int64_t>& counts) const {
  const int l = num_local_experts();
  if (counts.empty() || counts.size() % l != 0) {
    return InvalidArgument(absl::StrCat(counts.size(), " group counts"),
                           absl::StrCat("a multiple of ", l, " (runs of one per local expert)"));
  }
  const int runs = static_cast<int>(counts.size() / l);
  std::vector<int64_t> start(runs + 1, 0);
  for (int r = 0; r < runs; ++r) {
    start[r + 1] = start[r];
    for (int j = 0; j < l; ++j) start[r + 1] += counts[r * l + j];
  }
  return start;
}

absl::StatusOr<Tensor> ExpertMlps::ForwardGrouped(RunContext& ctx, const Tensor& x,
                                                  const std::vector<int64_t>& counts) {
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> start, RunStarts(counts));
  return ForwardRuns(ctx, x, counts, InOrder(static_cast<int>(start.size()) - 1),
                     [&](int r) -> absl::StatusOr<Tensor> {
                       return x.Slice(0, start[r], start[r + 1]);
                     });
}

absl::StatusOr<Tensor> ExpertMlps::ForwardRuns(RunContext& ctx, const Tensor& x,
                                               const std::vector<int64_t>& counts,
                                               const std::vector<int>& order,
                                               const RowSource& rows) {
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> start, RunStarts(counts));
  const int64_t m = x.dim(0), hidden = in_weight_->shape()[hidden_dim_];
  if (start.back() != m) {
    return InvalidArgument(absl::StrCat(m, " expert rows"),
                           absl::StrCat(start.back(), ", the sum of the group counts"));
  }
  const int l = num_local_experts();
  Tensor y;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/false, [&]() -> absl::Status {
    // kSwiGlu: the GEMM's (gate | up) pre-activation, twice the hidden width.
    const int64_t pre_width = activation_ == ExpertActivation::kSwiGlu ? 2 * hidden : hidden;
    WEFT_ASSIGN_OR_RETURN(Tensor pre, ctx.Empty({m, pre_width}, ctx.compute_dtype));
    WEFT_ASSIGN_OR_RETURN(Tensor h, ctx.Empty({m, hidden}, ctx.compute_dtype));
    WEFT_ASSIGN_OR_RETURN(y, ctx.Empty({m, channels_}, ctx.compute_dtype));
    for (int r : order) {
      const int64_t b = start[r], e = start[r + 1];
      WEFT_ASSIGN_OR_RETURN(Tensor xr, rows(r));
      if (e == b) continue;
      WEFT_RETURN_IF_ERROR(ForwardRun(ctx, xr, pre.Slice(0, b, e), h.Slice(0, b, e),
                                      y.Slice(0, b, e), RunCounts(counts, r, l)));
    }
    if (partial_ != nullptr) WEFT_RETURN_IF_ERROR(partial_->Sum(ctx, y));
    if (ctx.training) {
      SavedActivations& saved = ctx.Saved(this);
      saved[kInput] = x;
      saved[kPreActivation] = pre;
      saved[kHidden] = h;
      WEFT_ASSIGN_OR_RETURN(saved[kCounts], Tensor::FromVector<int64_t>(
                                                counts, {static_cast<int64_t>(counts.size())}));
    }
    return absl::OkStatus();
  }));
  return y;
}

absl::Status ExpertMlps::ForwardRun(RunContext& ctx, const Tensor& xr, const Tensor& pre,
                                    const Tensor& h, const Tensor& y,
                                    const std::vector<int64_t>& c) const {
  // Under tp one rank's partial sums carry the output bias.
  const bool bias = out_bias_ != nullptr && (partial_ == nullptr || partial_->adds_output_bias());
  if (activation_ == ExpertActivation::kSwiGlu) {
    // (M_r, C) -> (M_r, 2H) -> silu(gate) * up (M_r, H); the GEMM output kept for backward.
    WEFT_RETURN_IF_ERROR(GroupedGemm(
        *ctx.ops, ctx.kernel(),
        {.kind = GroupedGemmKind::kForward, .out = pre, .a = xr, .w = Grouped(in_weight_->value)},
        c));
    Tensor hr = h;
    WEFT_RETURN_IF_ERROR(ctx.ops->SwiGluForward(ctx.kernel(), hr, pre));
  } else {
    // (M_r, C) -> (M_r, H): GELU fused, the pre-activation kept for backward.
    WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, ctx.kernel(),
                                     {.kind = GroupedGemmKind::kForward, .out = h, .a = xr,
                                      .w = in_weight_->value, .epilogue = Epilogue::kBiasGelu,
                                      .bias = in_bias_->value, .aux = pre},
                                     c));
  }
  // (M_r, H) -> (M_r, C)
  return GroupedGemm(*ctx.ops, ctx.kernel(),
                     {.kind = GroupedGemmKind::kForward, .out = y, .a = h, .w = out_weight_->value,
                      .epilogue = bias ? Epilogue::kBias : Epilogue::kNone,
                      .bias = bias ? out_bias_->value : Tensor()},
                     c);
}

absl::StatusOr<Tensor> ExpertMlps::BackwardGrouped(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr || !(*saved)[kCounts].defined()) {
    return FailedPrecondition("ExpertMlps backward without saved input",
                              "ForwardGrouped in training mode before BackwardGrouped");
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> counts, (*saved)[kCounts].ToVector<int64_t>());
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> start, RunStarts(counts));
  return BackwardRuns(ctx, InOrder(static_cast<int>(start.size()) - 1),
                      [&](int r) -> absl::StatusOr<Tensor> {
                        return dy.Slice(0, start[r], start[r + 1]);
                      });
}

absl::StatusOr<Tensor> ExpertMlps::BackwardRuns(RunContext& ctx, const std::vector<int>& order,
                                                const RowSource& dy_rows) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr || !(*saved)[kInput].defined()) {
    return FailedPrecondition("ExpertMlps backward without saved input",
                              "ForwardGrouped in training mode before BackwardGrouped");
  }
  Tensor dx;
  WEFT_RETURN_IF_ERROR(RunHooked(ctx, /*backward=*/true, [&]() -> absl::Status {
    const Tensor x = (*saved)[kInput], pre = (*saved)[kPreActivation], h = (*saved)[kHidden];
    WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> counts, (*saved)[kCounts].ToVector<int64_t>());
    WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> start, RunStarts(counts));
    const int64_t m = x.dim(0), hidden = in_weight_->shape()[hidden_dim_];
    const int l = num_local_experts();
    const KernelContext k = ctx.kernel();
    const bool swiglu = activation_ == ExpertActivation::kSwiGlu;
    WEFT_ASSIGN_OR_RETURN(Tensor dpre, ctx.Empty(pre.shape(), ctx.compute_dtype));
    Tensor dh;  // kSwiGlu: d(silu(gate) * up)
    if (swiglu) {
      WEFT_ASSIGN_OR_RETURN(dh, ctx.Empty({m, hidden}, ctx.compute_dtype));
    }
    WEFT_ASSIGN_OR_RETURN(dx, ctx.Empty({m, channels_}, ctx.compute_dtype));
    for (int r : order) {
      const int64_t b = start[r], e = start[r + 1];
      WEFT_ASSIGN_OR_RETURN(Tensor dy, dy_rows(r));
      if (e == b) continue;
      const std::vector<int64_t> c = RunCounts(counts, r, l);
      const Tensor dpre_r = dpre.Slice(0, b, e), x_r = x.Slice(0, b, e);
      // Second projection: dW += dy^T h, db += column sums of dy per expert
      // (every tp rank holds all of dy: the bias gradient is whole
      // everywhere); first: dW += dpre^T x. Now, or at a split backward's W
      // (the buffers are this call's own or saved, so W reads them as B
      // left them).
      auto weight_grads = [ops = ctx.ops, k, l, c, dy, h_r = h.Slice(0, b, e), dpre_r, x_r,
                           out_w = out_weight_, out_b = out_bias_,
                           in_w = in_weight_]() -> absl::Status {
        WEFT_RETURN_IF_ERROR(GroupedGemm(
            *ops, k, {.kind = GroupedGemmKind::kWeightGrad, .out = out_w->grad, .a = dy, .b = h_r},
            c));
        if (out_b != nullptr) {
          int64_t row = 0;
          for (int j = 0; j < l; ++j) {
            if (c[j] > 0) {
              Tensor db = out_b->grad.Select(0, j);
              WEFT_RETURN_IF_ERROR(ops->BiasGrad(k, db, dy.Slice(0, row, row + c[j])));
            }
            row += c[j];
          }
        }
        return GroupedGemm(*ops, k,
                           {.kind = GroupedGemmKind::kWeightGrad, .out = Grouped(in_w->grad),
                            .a = dpre_r, .b = x_r},
                           c);
      };
      if (swiglu) {
        // dh = dy . W_down, then through silu(gate) * up to (dgate | dup).
        Tensor dh_r = dh.Slice(0, b, e);
        WEFT_RETURN_IF_ERROR(GroupedGemm(
            *ctx.ops, k,
            {.kind = GroupedGemmKind::kInputGrad, .out = dh_r, .a = dy, .w = out_weight_->value},
            c));
        Tensor dpre_w = dpre_r;
        WEFT_RETURN_IF_ERROR(ctx.ops->SwiGluBackward(k, dpre_w, dh_r, pre.Slice(0, b, e)));
      } else {
        // d(fc pre-activation) = (dy . W_proj) * gelu'(pre), fc's bias gradient fused.
        WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, k,
                                         {.kind = GroupedGemmKind::kInputGrad, .out = dpre_r,
                                          .a = dy, .w = out_weight_->value,
                                          .epilogue = Epilogue::kDGelu, .aux = pre.Slice(0, b, e),
                                          .bias_grad = in_bias_->grad},
                                         c));
      }
      if (ctx.defer_weight_grads) {
        ctx.store().Defer(ctx.slot, std::move(weight_grads));
      } else {
        WEFT_RETURN_IF_ERROR(weight_grads());
      }
      WEFT_RETURN_IF_ERROR(GroupedGemm(*ctx.ops, k,
                                       {.kind = GroupedGemmKind::kInputGrad,
                                        .out = dx.Slice(0, b, e), .a = dpre_r,
                                        .w = Grouped(in_weight_->value)},
                                       c));
    }
    if (partial_ != nullptr) WEFT_RETURN_IF_ERROR(partial_->Sum(ctx, dx));
    return absl::OkStatus();
  }));
  ctx.DropSaved(this);
  return dx;
}

}  // namespace weft
