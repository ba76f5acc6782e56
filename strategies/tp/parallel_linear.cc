#include "strategies/tp/parallel_linear.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/tp/region_ops.h"

namespace weft::tp {
namespace {

// Block rank / replicas of size / replicas; the copies beyond the first
// are saved by their first holder only.
absl::Status Place(Parameter* p, int dim, const TpComm& tp, int replicas = 1) {
  Placement placement;
  placement.Shard("tp", dim, tp.rank() / replicas, tp.size() / replicas);
  p->set_mp_replica(tp.rank() % replicas);
  return p->SetPlacement(std::move(placement));
}

absl::Status SavedOrError(SavedActivations* saved, const char* who) {
  if (saved == nullptr || !(*saved)[0].defined()) {
    return FailedPrecondition(absl::StrCat(who, " backward without saved input"),
                              "Forward in training mode before Backward");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WeightGradsNowOrAtW(RunContext& ctx, const Tensor& d, const Tensor& dy,
                                 const Tensor& x, Parameter* weight, Parameter* bias,
                                 const Shape& weight_view) {
  Tensor dw_a = d;
  if (ctx.defer_weight_grads && dy.defined() && d.raw_data() == dy.raw_data()) {
    WEFT_ASSIGN_OR_RETURN(dw_a, ctx.Empty(d.shape(), d.dtype()));
    WEFT_RETURN_IF_ERROR(dw_a.CopyFrom(d, ctx.stream, /*async=*/true));
  }
  // The parameters' gradient tensors are read when the work runs: strategies
  // may re-point them (buckets, shards) between B and W.
  auto work = [ops = ctx.ops, k = ctx.kernel(), weight, bias, weight_view, dw_a, x]() -> absl::Status {
    Tensor dw = weight_view.empty() ? weight->grad : weight->grad.View(weight_view);
    WEFT_RETURN_IF_ERROR(
        ops->Gemm(k, {.out = dw, .a = dw_a, .b = x, .trans_a = true, .accumulate = true}));
    if (bias == nullptr) return absl::OkStatus();
    Tensor db = bias->grad.View({bias->grad.numel()});
    return ops->BiasGrad(k, db, dw_a);
  };
  if (!ctx.defer_weight_grads) return work();
  ctx.store().Defer(ctx.slot, std::move(work));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ColumnParallelLinear>> ColumnParallelLinear::Create(
    int64_t in, int64_t out, ParallelLinearOptions o, TpComm tp) {
  if (o.replicas < 1 || tp.size() % o.replicas != 0) {
    return InvalidArgument(absl::StrCat("column-parallel linear with blocks on ", o.replicas,
                                        " ranks each over tp=", tp.size()),
                           "replicas dividing tp");
  }
  const int blocks = tp.size() / o.replicas;
  if (o.packed < 1 || out % o.packed != 0 || (out / o.packed) % blocks != 0) {
    return InvalidArgument(
        absl::StrCat("column-parallel linear with ", out, " outputs in ", o.packed,
                     " section(s) over ", blocks, " tp block(s)"),
        "outputs per section divisible by tp", "pick widths (and heads) that divide by tp");
  }
  std::unique_ptr<ColumnParallelLinear> m(new ColumnParallelLinear(in, out, o, std::move(tp)));
  WEFT_RETURN_IF_ERROR(m->Init());
  return m;
}

absl::Status ColumnParallelLinear::Init() {
  const int k = options_.packed;
  const int dim = k > 1 ? 1 : 0;
  const Shape w = k > 1 ? Shape{k, out_ / k, in_} : Shape{out_, in_};
  weight_ = RegisterParameter("weight", w, options_.weight_init, true);
  WEFT_RETURN_IF_ERROR(Place(weight_, dim, tp_, options_.replicas));
  if (options_.bias) {
    const Shape b = k > 1 ? Shape{k, out_ / k} : Shape{out_};
    bias_ = RegisterParameter("bias", b, InitSpec::Zeros(), false);
    WEFT_RETURN_IF_ERROR(Place(bias_, dim, tp_, options_.replicas));
  }
  local_out_ = out_ * options_.replicas / tp_.size();
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ColumnParallelLinear::Forward(RunContext& ctx, const Tensor& x) {
  if (x.dim(-1) != in_) {
    return InvalidArgument(absl::StrCat("input ", ShapeString(x.shape())),
                           absl::StrCat("last dimension ", in_));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor whole, EnterColumnRegion(tp_, ctx, x));
  const int64_t m = whole.numel() / in_;
  Tensor x2 = whole.View({m, in_});
  WEFT_ASSIGN_OR_RETURN(Tensor y, ctx.Empty({m, local_out_}, ctx.compute_dtype));
  GemmArgs g{.out = y, .a = x2, .b = weight_->value.View({local_out_, in_}), .trans_b = true};
  Tensor pre;
  if (options_.gelu) {
    WEFT_ASSIGN_OR_RETURN(pre, ctx.Empty({m, local_out_}, ctx.compute_dtype));
    g.epilogue = Epilogue::kBiasGelu;
    g.bias = bias_->value.View({local_out_});
    g.aux = pre;
  } else if (bias_ != nullptr) {
    g.epilogue = Epilogue::kBias;
    g.bias = bias_->value.View({local_out_});
  }
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(ctx.kernel(), g));
  Shape out_shape = whole.shape();
  out_shape.back() = local_out_;
  if (ctx.training) {
    SavedActivations& saved = ctx.Saved(this);
    saved[kInput] = x2;
    saved[kPreActivation] = pre;
    saved.shape = whole.shape();
  }
  return y.View(out_shape);
}

absl::StatusOr<Tensor> ColumnParallelLinear::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  WEFT_RETURN_IF_ERROR(SavedOrError(saved, "ColumnParallelLinear"));
  const Tensor x = (*saved)[kInput];
  const int64_t m = x.dim(0);
  Tensor dpre = dy.View({m, local_out_});
  if (options_.gelu) {
    WEFT_ASSIGN_OR_RETURN(dpre, ctx.Empty({m, local_out_}, ctx.compute_dtype));
    WEFT_RETURN_IF_ERROR(ctx.ops->GeluBackward(ctx.kernel(), dpre, dy.View({m, local_out_}),
                                               (*saved)[kPreActivation]));
  }
  WEFT_RETURN_IF_ERROR(
      WeightGradsNowOrAtW(ctx, dpre, dy, x, weight_, bias_, Shape{local_out_, in_}));
  WEFT_ASSIGN_OR_RETURN(Tensor dx, ctx.Empty({m, in_}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(
      ctx.kernel(), {.out = dx, .a = dpre, .b = weight_->value.View({local_out_, in_})}));
  const Shape whole_shape = saved->shape;
  ctx.DropSaved(this);
  // Every rank's dx is a partial sum over its output features.
  return EnterColumnRegionBackward(tp_, ctx, dx.View(whole_shape));
}

absl::StatusOr<std::unique_ptr<RowParallelLinear>> RowParallelLinear::Create(
    int64_t in, int64_t out, ParallelLinearOptions o, TpComm tp) {
  if (in % tp.size() != 0) {
    return InvalidArgument(
        absl::StrCat("row-parallel linear with ", in, " inputs over tp=", tp.size()),
        "inputs divisible by tp", "pick widths that divide by tp");
  }
  std::unique_ptr<RowParallelLinear> m(new RowParallelLinear(in, out, o, std::move(tp)));
  WEFT_RETURN_IF_ERROR(m->Init());
  return m;
}

absl::Status RowParallelLinear::Init() {
  weight_ = RegisterParameter("weight", {out_, in_}, options_.weight_init, true);
  WEFT_RETURN_IF_ERROR(Place(weight_, 1, tp_));
  if (options_.bias) bias_ = RegisterParameter("bias", {out_}, InitSpec::Zeros(), false);
  local_in_ = in_ / tp_.size();
  return absl::OkStatus();
}

absl::StatusOr<Tensor> RowParallelLinear::Forward(RunContext& ctx, const Tensor& x) {
  if (x.dim(-1) != local_in_) {
    return InvalidArgument(absl::StrCat("row-parallel input ", ShapeString(x.shape())),
                           absl::StrCat("last dimension ", local_in_, " (", in_, " / tp)"));
  }
  const int64_t m = x.numel() / local_in_;
  Tensor x2 = x.View({m, local_in_});
  WEFT_ASSIGN_OR_RETURN(Tensor y, ctx.Empty({m, out_}, ctx.compute_dtype));
  GemmArgs g{.out = y, .a = x2, .b = weight_->value, .trans_b = true};
  // The bias once in the sum: rank 0 adds it to its partial output.
  if (bias_ != nullptr && tp_.rank() == 0) {
    g.epilogue = Epilogue::kBias;
    g.bias = bias_->value;
  }
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(ctx.kernel(), g));
  Shape out_shape = x.shape();
  out_shape.back() = out_;
  if (ctx.training) ctx.Saved(this)[kInput] = x2;
  return LeaveRowRegion(tp_, ctx, y.View(out_shape));
}

absl::StatusOr<Tensor> RowParallelLinear::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  WEFT_RETURN_IF_ERROR(SavedOrError(saved, "RowParallelLinear"));
  const Tensor x = (*saved)[kInput];
  const int64_t m = x.dim(0);
  WEFT_ASSIGN_OR_RETURN(Tensor whole, LeaveRowRegionBackward(tp_, ctx, dy));
  Tensor d = whole.View({m, out_});
  WEFT_RETURN_IF_ERROR(WeightGradsNowOrAtW(ctx, d, dy, x, weight_, bias_, Shape{}));
  WEFT_ASSIGN_OR_RETURN(Tensor dx, ctx.Empty({m, local_in_}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->Gemm(ctx.kernel(), {.out = dx, .a = d, .b = weight_->value}));
  Shape in_shape = whole.shape();
  in_shape.back() = local_in_;
  ctx.DropSaved(this);
  return dx.View(in_shape);
}

}  // namespace weft::tp
