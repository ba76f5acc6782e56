#include "core/optim/f16_rounding.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/tensor/dtype.h"

namespace weft {

float RoundToF16(float v) { return F16BitsToFloat(FloatToF16Bits(v)); }

absl::Status RoundToF16InPlace(Tensor& t) {
  if (!t.defined() || t.device().is_meta()) return absl::OkStatus();
  if (!t.device().is_cpu() || t.dtype() != DType::kF32 || !t.is_contiguous()) {
    return InvalidArgument(absl::StrCat("fp16 emulation of ", t.DebugString()),
                           "a contiguous f32 CPU tensor",
                           "--dtype=fp16 is emulated on CPU only; on CUDA use --dtype=bf16");
  }
  float* p = t.data<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = RoundToF16(p[i]);
  return absl::OkStatus();
}

}  // namespace weft
