// CudaMoeKernelOps: checks operands and launches the kernels of moe.cu;
// registered for DeviceType::kCUDA when //core/kernels/cuda is linked.
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cuda/moe.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/kernels/moe_ops.h"

namespace weft::cuda {
namespace {

static_assert(kRouterMaxTopK == kMaxRouterTopK, "the router kernels' bound");

const float* OptionalF32(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

class CudaMoeKernelOps : public MoeKernelOps {
 public:
  absl::Status RouterTopK(const KernelContext& ctx, Tensor& probs, Tensor& lse, Tensor& idx,
                          Tensor& gates, const Tensor& logits, const RouterSpec& spec) override {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, logits, "logits"));
    const int k = spec.k;
    if (logits.ndim() != 2 || k < 1 || k > kMaxRouterTopK || k > logits.dim(1)) {
      return InvalidArgument(absl::StrCat("router logits ", ShapeString(logits.shape()),
                                          " with k=", k),
                             absl::StrCat("(N, E) logits and 1 <= k <= min(E, ",
                                          kMaxRouterTopK, ")"));
    }
    const int64_t n = logits.dim(0), e = logits.dim(1);
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, probs, "probs", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckShape(probs, "probs", {n, e}));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, lse, "lse", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckShape(lse, "lse", {n}));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, idx, "idx", DType::kI32));
    WEFT_RETURN_IF_ERROR(CheckShape(idx, "idx", {n, k}));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, gates, "gates", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckShape(gates, "gates", {n, k}));
    return LaunchRouterTopK(probs.data<float>(), lse.data<float>(), idx.data<int32_t>(),
                            gates.data<float>(), logits.raw_data(), logits.dtype(), n,
                            static_cast<int>(e), k, spec.score == RouterScore::kSigmoid,
                            spec.normalize, StreamOf(ctx));
  }

  absl::Status RouterTopKBackward(const KernelContext& ctx, Tensor& dlogits, const Tensor& dgates,
                                  const Tensor& probs, const Tensor& lse, const Tensor& idx,
                                  const Tensor& dprobs_extra, float lse_scale,
                                  const RouterSpec& spec) override {
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, probs, "probs", DType::kF32));
    if (probs.ndim() != 2 || idx.ndim() != 2 || idx.dim(1) < 1 ||
        idx.dim(1) > kMaxRouterTopK || idx.dim(1) != spec.k) {
      // The kernel keeps the choices' gradients in registers.
      return InvalidArgument(absl::StrCat("router backward with probs ", ShapeString(probs.shape()),
                                          " and choices ", ShapeString(idx.shape()),
                                          " for k=", spec.k),
                             absl::StrCat("(N, E) probs and (N, k) choices, k <= ",
                                          kMaxRouterTopK),
                             "pass RouterTopK's outputs");
    }
    const int64_t n = probs.dim(0), e = probs.dim(1), k = idx.dim(1);
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dlogits, "dlogits"));
    WEFT_RETURN_IF_ERROR(CheckShape(dlogits, "dlogits", {n, e}));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, dgates, "dgates", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckShape(dgates, "dgates", {n, k}));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, lse, "lse", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, idx, "idx", DType::kI32));
    if (dprobs_extra.defined()) {
      WEFT_RETURN_IF_ERROR(CheckDType(ctx, dprobs_extra, "dprobs_extra", DType::kF32));
      WEFT_RETURN_IF_ERROR(CheckShape(dprobs_extra, "dprobs_extra", {n, e}));
    }
    return LaunchRouterTopKBackward(dlogits.raw_data(), dlogits.dtype(), dgates.data<float>(),
                                    probs.data<float>(), lse.data<float>(), idx.data<int32_t>(),
                                    OptionalF32(dprobs_extra), lse_scale, n, static_cast<int>(e),
                                    static_cast<int>(k), spec.score == RouterScore::kSigmoid,
                                    spec.normalize, StreamOf(ctx));
  }

  absl::Status GatherRows(const KernelContext& ctx, Tensor& out, const Tensor& x,
                          const Tensor& assign, int k, const Tensor& weights) override {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, x, "x"));
    WEFT_RETURN_IF_ERROR(CheckSameDType(out, "out", x, "x"));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, assign, "assign", DType::kI32));
    const int64_t m = assign.numel(), c = x.dim(-1);
    WEFT_RETURN_IF_ERROR(CheckNumel(out, "out", m * c));
    if (weights.defined()) WEFT_RETURN_IF_ERROR(CheckDType(ctx, weights, "weights", DType::kF32));
    return LaunchGatherRows(out.raw_data(), x.raw_data(), assign.data<int32_t>(),
                            OptionalF32(weights), x.dtype(), m, c, k, StreamOf(ctx));
  }

  absl::Status CombineRows(const KernelContext& ctx, Tensor& out, const Tensor& src,
                           const Tensor& slots, const Tensor& weights, bool accumulate) override {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, out, "out"));
    WEFT_RETURN_IF_ERROR(CheckSameDType(src, "src", out, "out"));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, slots, "slots", DType::kI32));
    const int64_t n = slots.dim(0), k = slots.dim(1), c = out.dim(-1);
    WEFT_RETURN_IF_ERROR(CheckNumel(out, "out", n * c));
    if (weights.defined()) {
      WEFT_RETURN_IF_ERROR(CheckDType(ctx, weights, "weights", DType::kF32));
      WEFT_RETURN_IF_ERROR(CheckShape(weights, "weights", {n, k}));
    }
    return LaunchCombineRows(out.raw_data(), src.raw_data(), slots.data<int32_t>(),
                             OptionalF32(weights), out.dtype(), n, c, static_cast<int>(k),
                             accumulate, StreamOf(ctx));
  }

  absl::Status RowDots(const KernelContext& ctx, Tensor& out, const Tensor& dy, const Tensor& src,
                       const Tensor& slots) override {
    WEFT_RETURN_IF_ERROR(CheckFloat(ctx, dy, "dy"));
    WEFT_RETURN_IF_ERROR(CheckSameDType(src, "src", dy, "dy"));
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, slots, "slots", DType::kI32));
    const int64_t n = slots.dim(0), k = slots.dim(1), c = dy.dim(-1);
    WEFT_RETURN_IF_ERROR(CheckDType(ctx, out, "dgates", DType::kF32));
    WEFT_RETURN_IF_ERROR(CheckShape(out, "dgates", {n, k}));
    return LaunchRowDots(out.data<float>(), dy.raw_data(), src.raw_data(), slots.data<int32_t>(),
                         dy.dtype(), n, c, static_cast<int>(k), StreamOf(ctx));
  }
};

const bool kRegistered =
    RegisterMoeKernelOpsAtStartup(DeviceType::kCUDA, new CudaMoeKernelOps());

}  // namespace
}  // namespace weft::cuda
