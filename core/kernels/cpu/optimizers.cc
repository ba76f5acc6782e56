// AdamW and SGD over a list of segments. The clipping coefficient is derived
// from the device-resident squared norm, as on the GPU, so both paths apply
// the identical formula.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {
namespace {

absl::StatusOr<float> ClipCoefficient(float max_norm, const Tensor& norm_sq) {
  if (max_norm <= 0) return 1.0f;
  WEFT_RETURN_IF_ERROR(CheckNumel(norm_sq, "grad_norm_sq", 1));
  const float norm = std::sqrt(*norm_sq.data<float>());
  return std::min(1.0f, max_norm / (norm + 1e-6f));
}

absl::Status CheckSegment(const OptimSegment& s, bool adam) {
  WEFT_RETURN_IF_ERROR(CheckCpu(s.master, "optimizer master"));
  const int64_t n = s.master.numel();
  WEFT_RETURN_IF_ERROR(CheckFloat(s.grad, "optimizer grad"));
  if (s.grad.numel() != n) {
    return InvalidArgument(absl::StrCat("optimizer grad has ", s.grad.numel(), " elements"),
                           absl::StrCat(n, " like its master"));
  }
  WEFT_RETURN_IF_ERROR(CheckNumel(s.exp_avg, "optimizer exp_avg", n));
  if (adam) WEFT_RETURN_IF_ERROR(CheckNumel(s.exp_avg_sq, "optimizer exp_avg_sq", n));
  if (s.param.defined()) {
    WEFT_RETURN_IF_ERROR(CheckFloat(s.param, "optimizer param"));
    if (s.param.numel() != n) return InvalidArgument("optimizer param size", "master's size");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CpuKernelOps::AdamW(const KernelContext&, absl::Span<OptimSegment> segments,
                                 const AdamWHyper& h) {
  WEFT_ASSIGN_OR_RETURN(const auto scalars, HostAdamWStepScalars(h));
  const auto [lr, bc1, bc2] = scalars;
  WEFT_ASSIGN_OR_RETURN(float clip, ClipCoefficient(h.max_grad_norm, h.grad_norm_sq));
  const float gscale = h.grad_scale * clip;
  for (OptimSegment& s : segments) {
    WEFT_RETURN_IF_ERROR(CheckSegment(s, true));
    float* w = s.master.data<float>();
    float* m = s.exp_avg.data<float>();
    float* v = s.exp_avg_sq.data<float>();
    const float decay = s.weight_decay ? h.weight_decay : 0.0f;
    for (int64_t i = 0; i < s.master.numel(); ++i) {
      const float g = LoadF(s.grad, i) * gscale;
      m[i] = h.beta1 * m[i] + (1.0f - h.beta1) * g;
      v[i] = h.beta2 * v[i] + (1.0f - h.beta2) * g * g;
      const float mhat = m[i] / bc1, vhat = v[i] / bc2;
      w[i] -= lr * (mhat / (std::sqrt(vhat) + h.eps) + decay * w[i]);
      if (s.param.defined()) StoreF(s.param, i, w[i]);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuKernelOps::Sgd(const KernelContext&, absl::Span<OptimSegment> segments,
                               const SgdHyper& h) {
  WEFT_ASSIGN_OR_RETURN(const float lr, HostSgdLr(h));
  WEFT_ASSIGN_OR_RETURN(float clip, ClipCoefficient(h.max_grad_norm, h.grad_norm_sq));
  const float gscale = h.grad_scale * clip;
  for (OptimSegment& s : segments) {
    WEFT_RETURN_IF_ERROR(CheckSegment(s, false));
    float* w = s.master.data<float>();
    float* buf = s.exp_avg.data<float>();
    const float decay = s.weight_decay ? h.weight_decay : 0.0f;
    for (int64_t i = 0; i < s.master.numel(); ++i) {
      const float g = LoadF(s.grad, i) * gscale + decay * w[i];
      buf[i] = h.momentum * buf[i] + g;
      const float step = h.nesterov ? g + h.momentum * buf[i] : buf[i];
      w[i] -= lr * step;
      if (s.param.defined()) StoreF(s.param, i, w[i]);
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
