#include "core/runtime/job_dtypes.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<DType> ComputeDTypeOn(const TrainConfig& c, Device device) {
  if (c.dtype() == "auto") return device.is_cuda() ? DType::kBF16 : DType::kF32;
  WEFT_ASSIGN_OR_RETURN(DType compute, ParseDType(c.dtype()));
  if (compute != DType::kF32 && compute != DType::kBF16) {
    return InvalidArgument(absl::StrCat("--dtype=", c.dtype()), "auto, bf16 or f32");
  }
  if (device.is_cpu() && compute != DType::kF32) {
    return InvalidArgument("--dtype=bf16 on CPU", "--dtype=f32 (or auto) on CPU",
                           "the CPU kernels compute in f32; bf16 mixed precision is for CUDA");
  }
  return compute;
}

absl::StatusOr<DType> GradDTypeOn(const TrainConfig& c, Device device) {
  WEFT_ASSIGN_OR_RETURN(DType grad, ParseDType(c.grad_dtype()));
  if (grad != DType::kF32 && grad != DType::kBF16) {
    return InvalidArgument(absl::StrCat("--grad_dtype=", c.grad_dtype()), "f32 or bf16");
  }
  if (device.is_cpu() && grad != DType::kF32) {
    return InvalidArgument("--grad_dtype=bf16 on CPU", "f32 on CPU",
                           "bf16 gradients are for CUDA; the CPU kernels accumulate in f32");
  }
  return grad;
}

}  // namespace weft
