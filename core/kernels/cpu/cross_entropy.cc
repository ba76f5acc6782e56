// Fused softmax + cross-entropy, one row at a time; the gradient overwrites
// the logits so the (rows, vocab) probabilities are never stored twice.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/cpu/check_args.h"
#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {

absl::Status CpuKernelOps::CrossEntropyForwardBackward(const KernelContext&, Tensor& losses,
                                                       Tensor& logits, const Tensor& targets,
                                                       int64_t vocab, float dloss_scale,
                                                       bool compute_grad) {
  WEFT_RETURN_IF_ERROR(CheckCpu(logits, "cross_entropy logits"));
  const int64_t vp = logits.dim(-1), rows = logits.numel() / vp;
  if (vocab <= 0 || vocab > vp) {
    return InvalidArgument(absl::StrCat("vocab ", vocab, " with ", vp, " logit columns"),
                           "0 < vocab <= padded vocab");
  }
  WEFT_RETURN_IF_ERROR(CheckNumel(targets, "cross_entropy targets", rows, DType::kI32));
  WEFT_RETURN_IF_ERROR(CheckNumel(losses, "cross_entropy losses", rows));
  float* pl = logits.data<float>();
  const int32_t* tg = targets.data<int32_t>();
  float* loss = losses.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float* z = pl + r * vp;
    const int32_t y = tg[r];
    if (y >= vocab) {
      return InvalidArgument(absl::StrCat("target id ", y, " in row ", r),
                             absl::StrCat("ids < vocab ", vocab));
    }
    if (y < 0) {  // ignored position
      loss[r] = 0;
      if (compute_grad) std::fill(z, z + vp, 0.f);
      continue;
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < vocab; ++j) mx = std::max(mx, z[j]);
    double sum = 0;
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(double(z[j] - mx));
    const float log_sum = static_cast<float>(std::log(sum));
    loss[r] = -(z[y] - mx - log_sum);
    if (compute_grad) {
      for (int64_t j = 0; j < vocab; ++j) {
        const float p = std::exp(z[j] - mx - log_sum);
        z[j] = dloss_scale * (p - (j == y ? 1.f : 0.f));
      }
      for (int64_t j = vocab; j < vp; ++j) z[j] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::cpu
