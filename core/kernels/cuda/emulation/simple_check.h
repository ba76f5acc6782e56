// The plain helpers of the kernel check programs (kernels_check.cc,
// llama_layers_check.cc): a failure count, a checked line per result,
// seeded random data and the relative error against a reference. One
// translation unit per program (see run.sh), so inline definitions.
#pragma once
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>
#include "absl/status/status.h"

inline int bad = 0;
inline void Check(const char* what, double err, double tol) {
  printf("%-40s rel err %.2e %s\n", what, err, err <= tol ? "ok" : "FAIL");
  if (!(err <= tol)) ++bad;
}
inline std::vector<float> Rand(size_t n, int seed, float s = 1) {
  std::mt19937 g(seed); std::uniform_real_distribution<float> u(-s, s);
  std::vector<float> v(n); for (auto& x : v) x = u(g); return v;
}
template <typename A, typename B> double Err(const A& got, const B& want) {
  double sc = 1e-30, e = 0;
  for (size_t i = 0; i < want.size(); ++i) sc = std::max(sc, std::fabs(double(want[i])));
  for (size_t i = 0; i < want.size(); ++i) e = std::max(e, std::fabs(double(got[i]) - double(want[i])));
  return e / sc;
}
inline void ok(const absl::Status& s) { if (!s.ok()) { printf("status: %s\n", std::string(s.message()).c_str()); ++bad; } }

inline float AsF(float v) { return v; }
inline float AsF(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> T HostFromF(float v) {
  if constexpr (sizeof(T) == 2) return __float2bfloat16_rn(v); else return v;
}

