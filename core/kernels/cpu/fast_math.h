// Shared pieces of FastCpuKernelOps' translation units (fast_ops.cc,
// fast_layernorm.cc, fast_attention.cc): fixed-order 8-lane reductions, the
// fast exp/tanh/GELU, per-thread scratch, and the target_clones attribute.
// Internal to //core/kernels/cpu.
#ifndef WEFT_CORE_KERNELS_CPU_FAST_MATH_H_
#define WEFT_CORE_KERNELS_CPU_FAST_MATH_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/kernels/cpu/gelu_math.h"

#if defined(__SANITIZE_THREAD__)
// GCC 12 instruments the clones' ifunc resolvers, which the loader runs
// before ThreadSanitizer is set up (a segfault at load): one default body
// under --config=tsan. The clones give the same results anyway (see below).
#define WEFT_CLONES
#else
#define WEFT_CLONES __attribute__((target_clones("avx2", "default")))
#endif

namespace weft::cpu::fast {

constexpr int kL = 8;  // accumulator lanes (one AVX2 register)

// Fixed-order 8-lane reductions: vectorised without -ffast-math and the
// same result on every ISA clone.
inline float Dot(const float* a, const float* b, int64_t n) {
  float acc[kL] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t e = 0;
  for (; e + kL <= n; e += kL) {
    for (int l = 0; l < kL; ++l) acc[l] += a[e + l] * b[e + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; e < n; ++e) s += a[e] * b[e];
  return s;
}

inline float SumF(const float* a, int64_t n) {
  float acc[kL] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t e = 0;
  for (; e + kL <= n; e += kL) {
    for (int l = 0; l < kL; ++l) acc[l] += a[e + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; e < n; ++e) s += a[e];
  return s;
}

inline float MaxF(const float* a, int64_t n) {
  float acc[kL];
  for (int l = 0; l < kL; ++l) acc[l] = -INFINITY;
  int64_t e = 0;
  for (; e + kL <= n; e += kL) {
    for (int l = 0; l < kL; ++l) acc[l] = acc[l] > a[e + l] ? acc[l] : a[e + l];
  }
  float m = acc[0];
  for (int l = 1; l < kL; ++l) m = m > acc[l] ? m : acc[l];
  for (; e < n; ++e) m = m > a[e] ? m : a[e];
  return m;
}

inline void Axpy(float* y, float a, const float* x, int64_t n) {
  for (int64_t e = 0; e < n; ++e) y[e] += a * x[e];
}

// expf to ~2 ulp (Cephes polynomial), branch-free so loops vectorise.
// Inputs are clamped to [-87.3, 88.3].
inline float ExpF(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  const float t = x * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

inline float TanhF(float u) {
  const float e = ExpF(2.0f * u);
  const float big = 1.0f - 2.0f / (e + 1.0f);
  const float u2 = u * u;  // odd series near 0, where 1 - 2/(e+1) cancels
  const float small = u * (1.0f + u2 * (-1.0f / 3 + u2 * (2.0f / 15 + u2 * (-17.0f / 315))));
  const float au = u < 0 ? -u : u;
  return au < 0.125f ? small : big;
}

inline float GeluF(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + TanhF(u));
}

inline float GeluGradF(float x) {
  const float u = kGeluScale * (x + kGeluCubic * x * x * x);
  const float t = TanhF(u);
  const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

// Scratch reused across calls (one per pool thread), so steps do not allocate.
inline float* Scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace weft::cpu::fast

#endif  // WEFT_CORE_KERNELS_CPU_FAST_MATH_H_
