// FastCpuKernelOps layernorm: forward, residual forward and backward.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/fast_ops.h"
#include "core/kernels/cpu/thread_pool.h"

namespace weft::cpu {
namespace {

using namespace ::weft::cpu::fast;  // NOLINT: this unit's vector helpers

WEFT_CLONES void NormalizeRowsFast(float* out, float* mean, float* rstd, float* resid,
                                   const float* a, const float* b, const float* w,
                                   const float* bias, int64_t r0, int64_t r1, int64_t c,
                                   float eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr;
    if (b != nullptr) {  // fused residual: resid = a + b, normalise resid
      float* rr = resid + r * c;
      const float* ar = a + r * c;
      const float* br = b + r * c;
      for (int64_t i = 0; i < c; ++i) rr[i] = ar[i] + br[i];
      xr = rr;
    } else {
      xr = a + r * c;
    }
    const float m = SumF(xr, c) / static_cast<float>(c);
    float acc[kL] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + kL <= c; i += kL) {
      for (int l = 0; l < kL; ++l) {
        const float d = xr[i + l] - m;
        acc[l] += d * d;
      }
    }
    float var = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < c; ++i) var += (xr[i] - m) * (xr[i] - m);
    const float s = 1.0f / std::sqrt(var / static_cast<float>(c) + eps);
    float* o = out + r * c;
    for (int64_t k = 0; k < c; ++k) o[k] = (xr[k] - m) * s * w[k] + bias[k];
    mean[r] = m;
    rstd[r] = s;
  }
}

WEFT_CLONES void LayerNormDxRows(float* dx, const float* x, const float* dy, const float* w,
                                 const float* mean, const float* rstd, int64_t r0, int64_t r1,
                                 int64_t c, const float* residual, float* scratch) {
  float* xhat = scratch;
  float* dxhat = scratch + c;
  for (int64_t r = r0; r < r1; ++r) {
    const float m = mean[r], s = rstd[r];
    const float* xr = x + r * c;
    const float* gr = dy + r * c;
    for (int64_t i = 0; i < c; ++i) {
      xhat[i] = (xr[i] - m) * s;
      dxhat[i] = gr[i] * w[i];
    }
    const float mean_dxhat = SumF(dxhat, c) / static_cast<float>(c);
    const float mean_dxhat_xhat = Dot(dxhat, xhat, c) / static_cast<float>(c);
    float* d = dx + r * c;
    if (residual != nullptr) {  // may be dx itself
      const float* rr = residual + r * c;
      for (int64_t i = 0; i < c; ++i) {
        d[i] = rr[i] + s * (dxhat[i] - mean_dxhat - xhat[i] * mean_dxhat_xhat);
      }
    } else {
      for (int64_t i = 0; i < c; ++i) d[i] = s * (dxhat[i] - mean_dxhat - xhat[i] * mean_dxhat_xhat);
    }
  }
}

// dw[j] += sum_r dy[r,j] * xhat[r,j], db[j] += sum_r dy[r,j], rows in order.
WEFT_CLONES void LayerNormParamGradCols(float* dw, float* db, const float* x, const float* dy,
                                        const float* mean, const float* rstd, int64_t rows,
                                        int64_t c, int64_t j0, int64_t j1) {
  for (int64_t r = 0; r < rows; ++r) {
    const float m = mean[r], s = rstd[r];
    const float* xr = x + r * c;
    const float* gr = dy + r * c;
    for (int64_t j = j0; j < j1; ++j) {
      db[j] += gr[j];
      dw[j] += gr[j] * ((xr[j] - m) * s);
    }
  }
}

}  // namespace

absl::Status FastCpuKernelOps::LayerNormForward(const KernelContext& ctx, Tensor& out,
                                                Tensor& mean, Tensor& rstd, const Tensor& x,
                                                const Tensor& weight, const Tensor& bias,
                                                float eps) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "layernorm x"));
  if (x.ndim() < 1 || x.dim(-1) == 0) {
    return CpuKernelOps::LayerNormForward(ctx, out, mean, rstd, x, weight, bias, eps);
  }
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "layernorm out", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(mean, "layernorm mean", rows));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "layernorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "layernorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckShape(bias, "layernorm bias", {c}));
  float *po = out.data<float>(), *pm = mean.data<float>(), *ps = rstd.data<float>();
  const float *px = x.data<float>(), *pw = weight.data<float>(), *pb = bias.data<float>();
  ParallelFor(rows, 8, [&](int64_t r0, int64_t r1) {
    NormalizeRowsFast(po, pm, ps, nullptr, px, nullptr, pw, pb, r0, r1, c, eps);
  });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::ResidualLayerNormForward(
    const KernelContext& ctx, Tensor& residual_out, Tensor& out, Tensor& mean, Tensor& rstd,
    const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias, float eps) {
  WEFT_RETURN_IF_ERROR(CheckCpu(a, "layernorm x"));
  if (a.ndim() < 1 || a.dim(-1) == 0) {
    return CpuKernelOps::ResidualLayerNormForward(ctx, residual_out, out, mean, rstd, a, b,
                                                  weight, bias, eps);
  }
  WEFT_RETURN_IF_ERROR(CheckNumel(b, "residual b", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(residual_out, "residual out", a.numel()));
  const int64_t c = a.dim(-1), rows = a.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "layernorm out", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(mean, "layernorm mean", rows));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "layernorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "layernorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckShape(bias, "layernorm bias", {c}));
  float *po = out.data<float>(), *pm = mean.data<float>(), *ps = rstd.data<float>();
  float* pr = residual_out.data<float>();
  const float *pa = a.data<float>(), *pbb = b.data<float>();
  const float *pw = weight.data<float>(), *pb = bias.data<float>();
  ParallelFor(rows, 8, [&](int64_t r0, int64_t r1) {
    NormalizeRowsFast(po, pm, ps, pr, pa, pbb, pw, pb, r0, r1, c, eps);
  });
  return absl::OkStatus();
}

absl::Status FastCpuKernelOps::LayerNormBackward(const KernelContext& ctx, Tensor& dx,
                                                 Tensor& dweight, Tensor& dbias,
                                                 const Tensor& dy, const Tensor& x,
                                                 const Tensor& weight, const Tensor& mean,
                                                 const Tensor& rstd, const Tensor& residual) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "layernorm x"));
  if (x.ndim() < 1 || x.dim(-1) == 0) {
    return CpuKernelOps::LayerNormBackward(ctx, dx, dweight, dbias, dy, x, weight, mean, rstd,
                                           residual);
  }
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckNumel(dy, "layernorm out", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(mean, "layernorm mean", rows));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "layernorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "layernorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "layernorm dx", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckShape(dweight, "layernorm dweight", {c}));
  WEFT_RETURN_IF_ERROR(CheckShape(dbias, "layernorm dbias", {c}));
  if (residual.defined()) {
    WEFT_RETURN_IF_ERROR(CheckNumel(residual, "layernorm residual", x.numel()));
  }
  const float* pres = residual.defined() ? residual.data<float>() : nullptr;
  const float *px = x.data<float>(), *pdy = dy.data<float>(), *pw = weight.data<float>();
  const float *pm = mean.data<float>(), *ps = rstd.data<float>();
  float *pdx = dx.data<float>(), *pdw = dweight.data<float>(), *pdb = dbias.data<float>();
  // Parameter grads first: dx may alias dy.
  ParallelFor(c, 32, [&](int64_t j0, int64_t j1) {
    LayerNormParamGradCols(pdw, pdb, px, pdy, pm, ps, rows, c, j0, j1);
  });
  ParallelFor(rows, 8, [&](int64_t r0, int64_t r1) {
    LayerNormDxRows(pdx, px, pdy, pw, pm, ps, r0, r1, c, pres, Scratch(2 * c));
  });
  return absl::OkStatus();
}

}  // namespace weft::cpu
