// fp16 storage emulated on CPU, whose kernels compute in f32 only: an f32
// tensor is made to hold only fp16 values by rounding each element to the
// nearest fp16 value (ties to even, as CUDA's __float2half), so magnitudes
// of 65520 and up become inf, NaN stays NaN, and values below fp16's
// smallest subnormal (2^-24) flush to (signed) zero. The tensor stays f32.
//
// --dtype=fp16 on CPU rounds the parameters' compute copies after every
// optimizer update and the gradients before the overflow check, so steps
// overflow where fp16 gradients would on a GPU (core/runtime/README.md,
// "fp16 and loss scaling", says what else is and is not emulated).
#ifndef WEFT_CORE_OPTIM_F16_ROUNDING_H_
#define WEFT_CORE_OPTIM_F16_ROUNDING_H_

#include "absl/status/status.h"
#include "core/tensor/tensor.h"

namespace weft {

// The nearest fp16 value of `v`, as a float.
float RoundToF16(float v);

// Rounds every element of `t` (f32, contiguous, on the CPU) in place. On the
// meta device (dry runs) it does nothing; other devices and dtypes are
// InvalidArgument.
absl::Status RoundToF16InPlace(Tensor& t);

}  // namespace weft

#endif  // WEFT_CORE_OPTIM_F16_ROUNDING_H_
