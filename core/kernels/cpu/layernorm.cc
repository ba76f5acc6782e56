// LayerNorm over the last dimension, with f32 statistics saved for backward.
#include <cmath>

#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {
namespace {

absl::Status CheckLayerNorm(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                            const Tensor& x, const Tensor& weight, const Tensor& bias) {
  WEFT_RETURN_IF_ERROR(CheckCpu(x, "layernorm x"));
  if (x.ndim() < 1) return InvalidArgument("layernorm x is a scalar", "(..., C)");
  const int64_t c = x.dim(-1), rows = x.numel() / std::max<int64_t>(c, 1);
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "layernorm out", x.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(mean, "layernorm mean", rows));
  WEFT_RETURN_IF_ERROR(CheckNumel(rstd, "layernorm rstd", rows));
  WEFT_RETURN_IF_ERROR(CheckShape(weight, "layernorm weight", {c}));
  WEFT_RETURN_IF_ERROR(CheckShape(bias, "layernorm bias", {c}));
  return absl::OkStatus();
}

void NormalizeRows(float* out, float* mean, float* rstd, const float* x, const float* w,
                   const float* b, int64_t rows, int64_t c, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    double sum = 0;
    for (int64_t i = 0; i < c; ++i) sum += xr[i];
    const float m = static_cast<float>(sum / c);
    double var = 0;
    for (int64_t i = 0; i < c; ++i) var += double(xr[i] - m) * double(xr[i] - m);
    const float s = 1.0f / std::sqrt(static_cast<float>(var / c) + eps);
    for (int64_t i = 0; i < c; ++i) out[r * c + i] = (xr[i] - m) * s * w[i] + b[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

}  // namespace

absl::Status CpuKernelOps::LayerNormForward(const KernelContext&, Tensor& out, Tensor& mean,
                                            Tensor& rstd, const Tensor& x,
                                            const Tensor& weight, const Tensor& bias,
                                            float eps) {
  WEFT_RETURN_IF_ERROR(CheckLayerNorm(out, mean, rstd, x, weight, bias));
  const int64_t c = x.dim(-1);
  NormalizeRows(out.data<float>(), mean.data<float>(), rstd.data<float>(), x.data<float>(),
                weight.data<float>(), bias.data<float>(), x.numel() / c, c, eps);
  return absl::OkStatus();
}

absl::Status CpuKernelOps::ResidualLayerNormForward(const KernelContext&, Tensor& residual_out,
                                                    Tensor& out, Tensor& mean, Tensor& rstd,
                                                    const Tensor& a, const Tensor& b,
                                                    const Tensor& weight, const Tensor& bias,
                                                    float eps) {
  WEFT_RETURN_IF_ERROR(CheckNumel(b, "residual b", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckNumel(residual_out, "residual out", a.numel()));
  WEFT_RETURN_IF_ERROR(CheckLayerNorm(out, mean, rstd, a, weight, bias));
  float* r = residual_out.data<float>();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) r[i] = pa[i] + pb[i];
  const int64_t c = a.dim(-1);
  NormalizeRows(out.data<float>(), mean.data<float>(), rstd.data<float>(), r,
                weight.data<float>(), bias.data<float>(), a.numel() / c, c, eps);
  return absl::OkStatus();
}

absl::Status CpuKernelOps::LayerNormBackward(const KernelContext&, Tensor& dx, Tensor& dweight,
                                             Tensor& dbias, const Tensor& dy, const Tensor& x,
                                             const Tensor& weight, const Tensor& mean,
                                             const Tensor& rstd, const Tensor& residual) {
  WEFT_RETURN_IF_ERROR(CheckLayerNorm(dy, mean, rstd, x, weight, weight));
  WEFT_RETURN_IF_ERROR(CheckNumel(dx, "layernorm dx", x.numel()));
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  WEFT_RETURN_IF_ERROR(CheckShape(dweight, "layernorm dweight", {c}));
  WEFT_RETURN_IF_ERROR(CheckShape(dbias, "layernorm dbias", {c}));
  if (residual.defined()) {
    WEFT_RETURN_IF_ERROR(CheckNumel(residual, "layernorm residual", x.numel()));
  }
  // May be dx itself (accumulate): element i is read before it is written.
  const float* res = residual.defined() ? residual.data<float>() : nullptr;
  const float* px = x.data<float>();
  const float* pdy = dy.data<float>();
  const float* w = weight.data<float>();
  float* pdx = dx.data<float>();
  float* dw = dweight.data<float>();
  float* db = dbias.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float m = mean.data<float>()[r], s = rstd.data<float>()[r];
    const float* xr = px + r * c;
    const float* gr = pdy + r * c;
    // dxhat = dy * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int64_t i = 0; i < c; ++i) {
      const float xhat = (xr[i] - m) * s;
      const float dxhat = gr[i] * w[i];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += double(dxhat) * xhat;
      db[i] += gr[i];
      dw[i] += gr[i] * xhat;
    }
    const float mean_dxhat = static_cast<float>(sum_dxhat / c);
    const float mean_dxhat_xhat = static_cast<float>(sum_dxhat_xhat / c);
    for (int64_t i = 0; i < c; ++i) {
      const float xhat = (xr[i] - m) * s;
      const float v = s * (gr[i] * w[i] - mean_dxhat - xhat * mean_dxhat_xhat);
      pdx[r * c + i] = res != nullptr ? res[r * c + i] + v : v;
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
