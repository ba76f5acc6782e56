// Operand checks shared by the CPU kernels: every op validates its tensors
// and names the operand that is wrong, so a layer bug surfaces as a Status.
#ifndef WEFT_CORE_KERNELS_CPU_CHECK_ARGS_H_
#define WEFT_CORE_KERNELS_CPU_CHECK_ARGS_H_

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/tensor/tensor.h"

namespace weft::cpu {

// A defined, contiguous CPU tensor of `dtype` (default f32).
absl::Status CheckCpu(const Tensor& t, absl::string_view name, DType dtype = DType::kF32);
// CheckCpu plus an exact shape.
absl::Status CheckShape(const Tensor& t, absl::string_view name,
                        std::initializer_list<int64_t> shape, DType dtype = DType::kF32);
// CheckCpu plus an element count.
absl::Status CheckNumel(const Tensor& t, absl::string_view name, int64_t numel,
                        DType dtype = DType::kF32);

// Element accessors for f32 or bf16 tensors (gradients may be either).
float LoadF(const Tensor& t, int64_t i);
void StoreF(Tensor& t, int64_t i, float v);
absl::Status CheckFloat(const Tensor& t, absl::string_view name);

}  // namespace weft::cpu

#endif  // WEFT_CORE_KERNELS_CPU_CHECK_ARGS_H_
