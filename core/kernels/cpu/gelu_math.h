// GELU, tanh approximation (as in GPT-2), and its derivative; shared by the
// standalone GELU kernels and the GEMM epilogues.
#ifndef WEFT_CORE_KERNELS_CPU_GELU_MATH_H_
#define WEFT_CORE_KERNELS_CPU_GELU_MATH_H_

#include <cmath>

namespace weft::cpu {

inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluCubic = 0.044715f;

inline float Gelu(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}

inline float GeluGrad(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  const float t = std::tanh(u);
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

}  // namespace weft::cpu

#endif  // WEFT_CORE_KERNELS_CPU_GELU_MATH_H_
