// RMSNorm (Llama) over the last dimension, optionally fused with the
// residual add before it; f32 rstd saved for backward. Rows run in parallel
// and the weight gradient in parallel over columns, so results do not
// depend on the thread count; the fixed-order 8-lane sums of fast_math.h
// vectorise without reordering.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/thread_pool.h"

namespace weft::cpu {
namespace {

using fast::Dot;

absl::Status CheckRows(const Tensor& x, const Tensor& weight, const Tensor& rstd,
                       int64_t* rows, int64_t* c) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "rmsnorm x"));
  if (x.ndim() < 1 || x.dim(-1) < 1) {
    return InvalidArgument(absl::StrCat("rmsnorm x ", ShapeString(x.shape())), "(..., C), C >= 1");
  }
  *c = x.dim(-1);
  *rows = x.numel() / *c;
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "rmsnorm weight", {*c}));
  return CheckNumel(rstd, "rmsnorm rstd", *rows);
}

WEFT_CLONES void NormalizeRows(float* out, float* rstd, const float* x, const float* w,
                               int64_t r0, int64_t r1, int64_t c, float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * c;
    const float s = 1.0f / std::sqrt(Dot(xr, xr, c) / static_cast<float>(c) + eps);
    float* o = out + r * c;
    for (int64_t i = 0; i < c; ++i) o[i] = (xr[i] * s) * w[i];
    rstd[r] = s;
  }
}

WEFT_CLONES void AddRows(float* out, const float* a, const float* b, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
}

// dweight[j] += sum over rows of dy * x * rstd, columns [j0, j1).
WEFT_CLONES void WeightGradCols(float* dw, const float* x, const float* dy, const float* rstd,
                                int64_t rows, int64_t c, int64_t j0, int64_t j1) {
  for (int64_t r = 0; r < rows; ++r) {
    const float s = rstd[r];
    const float* xr = x + r * c;
    const float* dr = dy + r * c;
    for (int64_t j = j0; j < j1; ++j) dw[j] += dr[j] * (xr[j] * s);
  }
}

// dx = residual + rstd * (g - xhat * mean(g * xhat)), g = dy * w.
WEFT_CLONES void DxRows(float* dx, const float* x, const float* dy, const float* w,
                        const float* rstd, const float* residual, int64_t r0, int64_t r1,
                        int64_t c, float* g) {
  for (int64_t r = r0; r < r1; ++r) {
    const float s = rstd[r];
    const float* xr = x + r * c;
    const float* dr = dy + r * c;
    for (int64_t i = 0; i < c; ++i) g[i] = dr[i] * w[i];
    const float m = Dot(g, xr, c) * s / static_cast<float>(c);
    float* o = dx + r * c;
    const float* res = residual != nullptr ? residual + r * c : nullptr;
    for (int64_t i = 0; i < c; ++i) {
      const float v = s * (g[i] - (xr[i] * s) * m);
      o[i] = res != nullptr ? res[i] + v : v;
    }
  }
}

}  // namespace

absl::Status CpuKernelOps::RmsNormForward(const KernelContext&, Tensor& residual_out, Tensor& out,
                                          Tensor& rstd, const Tensor& a, const Tensor& b,
                                          const Tensor& weight, float eps) {
  int64_t rows = 0, c = 0;
  WEFT_RETURN_IF_ERROR(CheckRows(a, weight, rstd, &rows, &c));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "rmsnorm out", a.numel()));
  const float* x = a.data<float>();
  if (b.defined()) {
    WEFT_RETURN_IF_ERROR(CheckNumel(b, "rmsnorm residual b", a.numel()));
    WEFT_RETURN_IF_ERROR(CheckNumel(residual_out, "rmsnorm residual out", a.numel()));
    float* r = residual_out.data<float>();
    const float *pa = a.data<float>(), *pb = b.data<float>();
    ParallelFor(a.numel(), 4096, [&](int64_t i0, int64_t i1) { AddRows(r, pa, pb, i0, i1); });
    x = r;
  }
  float *po = out.data<float>(), *ps = rstd.data<float>();
  const float* pw = weight.data<float>();
  ParallelFor(rows, 8, [&](int64_t r0, int64_t r1) { NormalizeRows(po, ps, x, pw, r0, r1, c, eps); });
  return absl::OkStatus();
}

absl::Status CpuKernelOps::RmsNormBackward(const KernelContext&, Tensor& dx, Tensor& dweight,
                                           const Tensor& dy, const Tensor& x, const Tensor& weight,
                                           const Tensor& rstd, const Tensor& residual) {
  int64_t rows = 0, c = 0;
  WEFT_RETURN_IF_ERROR(CheckRows(x, weight, rstd, &rows, &c));
  WEFT_RETURN_IF_ERROR(CheckNumel(dy, "rmsnorm dy", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "rmsnorm dx", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckShape(dweight, "rmsnorm dweight", {c}));
  if (residual.defined()) {
    WEFT_RETURN_IF_ERROR(CheckNumel(residual, "rmsnorm residual", x.numel()));
  }
  const float *px = x.data<float>(), *pdy = dy.data<float>(), *pw = weight.data<float>();
  const float* ps = rstd.data<float>();
  const float* pres = residual.defined() ? residual.data<float>() : nullptr;
  float *pdx = dx.data<float>(), *pdw = dweight.data<float>();
  // The weight gradient first: dx may alias dy.
  ParallelFor(c, 32, [&](int64_t j0, int64_t j1) { WeightGradCols(pdw, px, pdy, ps, rows, c, j0, j1); });
  ParallelFor(rows, 8, [&](int64_t r0, int64_t r1) {
    DxRows(pdx, px, pdy, pw, ps, pres, r0, r1, c, fast::Scratch(c));
  });
  return absl::OkStatus();
}

}  // namespace weft::cpu
