// CPU reference of the mixture-of-experts kernels (core/kernels/moe_ops.h):
// f32 activations, i32 indices, one loop per output row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/moe_ops.h"

namespace weft::cpu {
namespace {

class CpuMoeKernelOps : public MoeKernelOps {
 public:
  absl::Status RouterTopK(const KernelContext&, Tensor& probs, Tensor& lse, Tensor& idx,
                          Tensor& gates, const Tensor& logits, const RouterSpec& spec) override {
    const int k = spec.k;
    WEFT_RETURN_IF_ERROR(CheckCpu(logits, "logits"));
    if (logits.ndim() != 2 || k < 1 || k > logits.dim(1)) {
      return InvalidArgument(absl::StrCat("router logits ", ShapeString(logits.shape()),
                                          " with k=", k),
                             "(N, E) logits and 1 <= k <= E");
    }
    const int64_t n = logits.dim(0), e = logits.dim(1);
    WEFT_RETURN_IF_ERROR(CheckShape(probs, "probs", {n, e}));
    WEFT_RETURN_IF_ERROR(CheckShape(lse, "lse", {n}));
    WEFT_RETURN_IF_ERROR(CheckShape(idx, "idx", {n, k}, DType::kI32));
    WEFT_RETURN_IF_ERROR(CheckShape(gates, "gates", {n, k}));
    const float* x = logits.data<float>();
    float* p = probs.data<float>();
    std::vector<int> order(e);
    for (int64_t t = 0; t < n; ++t) {
      const float* row = x + t * e;
      float* prow = p + t * e;
      const float mx = *std::max_element(row, row + e);
      double sum = 0;
      for (int64_t j = 0; j < e; ++j) sum += std::exp(static_cast<double>(row[j] - mx));
      lse.data<float>()[t] = mx + static_cast<float>(std::log(sum));
      for (int64_t j = 0; j < e; ++j) {
        prow[j] = spec.score == RouterScore::kSigmoid
                      ? static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(row[j]))))
                      : static_cast<float>(std::exp(static_cast<double>(row[j] - mx)) / sum);
      }
      // Partial selection of the k largest; ties keep the lower index.
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [prow](int a, int b) {
        return prow[a] > prow[b] || (prow[a] == prow[b] && a < b);
      });
      double chosen = 0;
      for (int j = 0; j < k; ++j) chosen += prow[order[j]];
      for (int j = 0; j < k; ++j) {
        idx.data<int32_t>()[t * k + j] = order[j];
        const float pj = prow[order[j]];
        gates.data<float>()[t * k + j] = spec.normalize ? static_cast<float>(pj / chosen) : pj;
      }
    }
    return absl::OkStatus();
  }

  absl::Status RouterTopKBackward(const KernelContext&, Tensor& dlogits, const Tensor& dgates,
                                  const Tensor& probs, const Tensor& lse, const Tensor& idx,
                                  const Tensor& dprobs_extra, float lse_scale,
                                  const RouterSpec& spec) override {
    WEFT_RETURN_IF_ERROR(CheckCpu(probs, "probs"));
    const int64_t n = probs.dim(0), e = probs.dim(1), k = idx.dim(1);
    WEFT_RETURN_IF_ERROR(CheckShape(dlogits, "dlogits", {n, e}));
    WEFT_RETURN_IF_ERROR(CheckShape(dgates, "dgates", {n, k}));
    WEFT_RETURN_IF_ERROR(CheckShape(lse, "lse", {n}));
    WEFT_RETURN_IF_ERROR(CheckShape(idx, "idx", {n, k}, DType::kI32));
    if (dprobs_extra.defined()) {
      WEFT_RETURN_IF_ERROR(CheckShape(dprobs_extra, "dprobs_extra", {n, e}));
    }
    std::vector<double> dp(e);
    for (int64_t t = 0; t < n; ++t) {
      const float* p = probs.data<float>() + t * e;
      const int32_t* ix = idx.data<int32_t>() + t * k;
      const float* dg = dgates.data<float>() + t * k;
      for (int64_t j = 0; j < e; ++j) {
        dp[j] = dprobs_extra.defined() ? dprobs_extra.data<float>()[t * e + j] : 0.0;
      }
      if (!spec.normalize) {
        for (int64_t j = 0; j < k; ++j) dp[ix[j]] += dg[j];
      } else {
        // g_j = p_j / S over the chosen: dp_j = (dg_j - sum_i dg_i g_i) / S.
        double s = 0, dot = 0;
        for (int64_t j = 0; j < k; ++j) s += p[ix[j]];
        for (int64_t j = 0; j < k; ++j) dot += dg[j] * (p[ix[j]] / s);
        for (int64_t j = 0; j < k; ++j) dp[ix[j]] += (dg[j] - dot) / s;
      }
      float* out = dlogits.data<float>() + t * e;
      if (spec.score == RouterScore::kSigmoid) {
        for (int64_t j = 0; j < e; ++j) out[j] = static_cast<float>(p[j] * (1.0 - p[j]) * dp[j]);
        continue;
      }
      // Softmax backward; d lse / d logit_j = p_j.
      double pdp = 0;
      for (int64_t j = 0; j < e; ++j) pdp += p[j] * dp[j];
      const double dlse = static_cast<double>(lse_scale) * lse.data<float>()[t];
      for (int64_t j = 0; j < e; ++j) out[j] = static_cast<float>(p[j] * (dp[j] - pdp + dlse));
    }
    return absl::OkStatus();
  }

  absl::Status GatherRows(const KernelContext&, Tensor& out, const Tensor& x,
                          const Tensor& assign, int k, const Tensor& weights) override {
    WEFT_RETURN_IF_ERROR(CheckCpu(x, "x"));
    WEFT_RETURN_IF_ERROR(CheckCpu(assign, "assign", DType::kI32));
    const int64_t m = assign.numel(), n = x.dim(0), c = x.numel() / std::max<int64_t>(1, n);
    WEFT_RETURN_IF_ERROR(CheckNumel(out, "out", m * c));
    if (weights.defined()) WEFT_RETURN_IF_ERROR(CheckNumel(weights, "weights", n * k));
    for (int64_t i = 0; i < m; ++i) {
      const int32_t a = assign.data<int32_t>()[i];
      if (a < 0 || a >= n * k) {
        return InvalidArgument(absl::StrCat("choice index ", a), absl::StrCat("in [0, ", n * k, ")"));
      }
      const float* src = x.data<float>() + (a / k) * c;
      float* dst = out.data<float>() + i * c;
      const float w = weights.defined() ? weights.data<float>()[a] : 1.0f;
      for (int64_t j = 0; j < c; ++j) dst[j] = w * src[j];
    }
    return absl::OkStatus();
  }

  absl::Status CombineRows(const KernelContext&, Tensor& out, const Tensor& src,
                           const Tensor& slots, const Tensor& weights, bool accumulate) override {
    WEFT_RETURN_IF_ERROR(CheckCpu(slots, "slots", DType::kI32));
    const int64_t n = slots.dim(0), k = slots.dim(1), m = src.dim(0);
    const int64_t c = out.numel() / std::max<int64_t>(1, n);
    WEFT_RETURN_IF_ERROR(CheckNumel(out, "out", n * c));
    WEFT_RETURN_IF_ERROR(CheckNumel(src, "src", m * c));
    if (weights.defined()) WEFT_RETURN_IF_ERROR(CheckShape(weights, "weights", {n, k}));
    for (int64_t t = 0; t < n; ++t) {
      float* o = out.data<float>() + t * c;
      if (!accumulate) std::fill_n(o, c, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int32_t s = slots.data<int32_t>()[t * k + j];
        if (s < 0) continue;
        if (s >= m) return InvalidArgument(absl::StrCat("slot ", s), "in [-1, M)");
        const float w = weights.defined() ? weights.data<float>()[t * k + j] : 1.0f;
        const float* r = src.data<float>() + s * c;
        for (int64_t i = 0; i < c; ++i) o[i] += w * r[i];
      }
    }
    return absl::OkStatus();
  }

  absl::Status RowDots(const KernelContext&, Tensor& out, const Tensor& dy, const Tensor& src,
                       const Tensor& slots) override {
    WEFT_RETURN_IF_ERROR(CheckCpu(slots, "slots", DType::kI32));
    const int64_t n = slots.dim(0), k = slots.dim(1);
    const int64_t c = dy.numel() / std::max<int64_t>(1, n);
    WEFT_RETURN_IF_ERROR(CheckShape(out, "dgates", {n, k}));
    WEFT_RETURN_IF_ERROR(CheckNumel(src, "src", src.dim(0) * c));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const int32_t s = slots.data<int32_t>()[t * k + j];
        double acc = 0;
        if (s >= 0) {
          const float* a = dy.data<float>() + t * c;
          const float* b = src.data<float>() + s * c;
          for (int64_t i = 0; i < c; ++i) acc += static_cast<double>(a[i]) * b[i];
        }
        out.data<float>()[t * k + j] = static_cast<float>(acc);
      }
    }
    return absl::OkStatus();
  }
};

const bool kRegistered =
    RegisterMoeKernelOpsAtStartup(DeviceType::kCPU, new CpuMoeKernelOps());

}  // namespace
}  // namespace weft::cpu
