// Sums in double so the reference is accurate regardless of tensor size.
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {

absl::Status CpuKernelOps::Sum(const KernelContext&, Tensor& out, const Tensor& x,
                               bool accumulate) {
  WEFT_RETURN_IF_ERROR(CheckFloat(x, "sum x"));
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "sum out", 1));
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += LoadF(x, i);
  float* o = out.data<float>();
  *o = static_cast<float>(accumulate ? *o + s : s);
  return absl::OkStatus();
}

absl::Status CpuKernelOps::SumSquares(const KernelContext&, Tensor& out,
                                      absl::Span<const Tensor> tensors) {
  WEFT_RETURN_IF_ERROR(CheckNumel(out, "sum_squares out", 1));
  double s = 0;
  for (const Tensor& t : tensors) {
    WEFT_RETURN_IF_ERROR(CheckFloat(t, "sum_squares input"));
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = LoadF(t, i);
      s += v * v;
    }
  }
  *out.data<float>() = static_cast<float>(s);
  return absl::OkStatus();
}

}  // namespace weft::cpu
