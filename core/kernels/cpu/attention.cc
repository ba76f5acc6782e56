// Causal self-attention reference: per (batch, head), scores are computed a
// row at a time so memory stays O(T) per row; the logsumexp per query row is
// saved and backward recomputes the probabilities from it, exactly like the
// fused GPU kernel.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {
namespace {

struct Dims {
  int64_t b, t, c, nh, hs;
};

absl::StatusOr<Dims> CheckQkv(const Tensor& qkv, int num_heads) {
  WEFT_RETURN_IF_ERROR(CheckCpu(qkv, "attention qkv"));
  if (qkv.ndim() != 3 || qkv.dim(2) % 3 != 0) {
    return InvalidArgument("attention qkv has shape " + ShapeString(qkv.shape()),
                           "(B, T, 3*C)");
  }
  Dims d{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3, num_heads, 0};
  if (num_heads <= 0 || d.c % num_heads != 0) {
    return InvalidArgument(absl::StrCat("num_heads=", num_heads, " with C=", d.c),
                           "a positive divisor of C");
  }
  d.hs = d.c / num_heads;
  return d;
}

}  // namespace

absl::Status CpuKernelOps::AttentionForward(const KernelContext&, Tensor& out, Tensor& lse,
                                            const Tensor& qkv, int num_heads) {
  WEFT_ASSIGN_OR_RETURN(Dims d, CheckQkv(qkv, num_heads));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "attention out", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "attention lse", {d.b, d.nh, d.t}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const float* base = qkv.data<float>();
  float* po = out.data<float>();
  float* pl = lse.data<float>();
  std::vector<float> s(d.t);
  for (int64_t b = 0; b < d.b; ++b) {
    for (int64_t h = 0; h < d.nh; ++h) {
      for (int64_t i = 0; i < d.t; ++i) {
        const float* q = base + (b * d.t + i) * 3 * d.c + h * d.hs;
        float mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const float* k = base + (b * d.t + j) * 3 * d.c + d.c + h * d.hs;
          float dot = 0;
          for (int64_t e = 0; e < d.hs; ++e) dot += q[e] * k[e];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(double(s[j] - mx));
        const float l = mx + static_cast<float>(std::log(sum));
        pl[(b * d.nh + h) * d.t + i] = l;
        float* o = po + (b * d.t + i) * d.c + h * d.hs;
        for (int64_t e = 0; e < d.hs; ++e) o[e] = 0;
        for (int64_t j = 0; j <= i; ++j) {
          const float p = std::exp(s[j] - l);
          const float* v = base + (b * d.t + j) * 3 * d.c + 2 * d.c + h * d.hs;
          for (int64_t e = 0; e < d.hs; ++e) o[e] += p * v[e];
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuKernelOps::AttentionBackward(const KernelContext&, Tensor& dqkv,
                                             const Tensor& dout, const Tensor& qkv,
                                             const Tensor& out, const Tensor& lse,
                                             int num_heads) {
  WEFT_ASSIGN_OR_RETURN(Dims d, CheckQkv(qkv, num_heads));
  WEFT_RETURN_IF_ERROR(CheckShape(dqkv, "attention dqkv", {d.b, d.t, 3 * d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(dout, "attention dout", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(out, "attention out", {d.b, d.t, d.c}));
  WEFT_RETURN_IF_ERROR(CheckShape(lse, "attention lse", {d.b, d.nh, d.t}));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hs));
  const float* base = qkv.data<float>();
  float* dbase = dqkv.data<float>();
  std::fill(dbase, dbase + dqkv.numel(), 0.f);
  const int64_t row = 3 * d.c;
  for (int64_t b = 0; b < d.b; ++b) {
    for (int64_t h = 0; h < d.nh; ++h) {
      for (int64_t i = 0; i < d.t; ++i) {
        const float* q = base + (b * d.t + i) * row + h * d.hs;
        const float* go = dout.data<float>() + (b * d.t + i) * d.c + h * d.hs;
        const float* o = out.data<float>() + (b * d.t + i) * d.c + h * d.hs;
        const float l = lse.data<float>()[(b * d.nh + h) * d.t + i];
        float dsum = 0;  // D_i = dO_i . O_i = sum_j P_ij dP_ij
        for (int64_t e = 0; e < d.hs; ++e) dsum += go[e] * o[e];
        float* dq = dbase + (b * d.t + i) * row + h * d.hs;
        for (int64_t j = 0; j <= i; ++j) {
          const float* k = base + (b * d.t + j) * row + d.c + h * d.hs;
          const float* v = base + (b * d.t + j) * row + 2 * d.c + h * d.hs;
          float dot = 0, dp = 0;
          for (int64_t e = 0; e < d.hs; ++e) {
            dot += q[e] * k[e];
            dp += go[e] * v[e];
          }
          const float p = std::exp(dot * scale - l);
          const float ds = p * (dp - dsum) * scale;
          float* dk = dbase + (b * d.t + j) * row + d.c + h * d.hs;
          float* dv = dbase + (b * d.t + j) * row + 2 * d.c + h * d.hs;
          for (int64_t e = 0; e < d.hs; ++e) {
            dq[e] += ds * k[e];
            dk[e] += ds * q[e];
            dv[e] += p * go[e];
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
