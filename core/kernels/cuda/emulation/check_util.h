// Shared by the emulation check programs (see run.sh); each is one
// translation unit, so the definitions here exist once per program.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>
#include "core/tensor/cuda/cuda_check.h"
#include "core/tensor/dtype.h"

namespace weft {
// cuda_check.h's error hook, otherwise defined in //core/tensor/cuda.
absl::Status CudaError(cudaError_t err, const char* expr, const char*, int) {
  return absl::InternalError(std::string(expr) + " " + std::to_string(int(err)));
}
}  // namespace weft

namespace emu_check {

inline float Round(weft::DType dt, float x) {
  return dt == weft::DType::kBF16 ? __bfloat162float(__float2bfloat16_rn(x)) : x;
}

// n values uniform in [-s, s), rounded to dt (so a double reference sees
// exactly what the kernel reads).
inline std::vector<float> Rand(size_t n, std::mt19937& g, weft::DType dt, float s = 1.5f) {
  std::uniform_real_distribution<float> u(-s, s);
  std::vector<float> v(n);
  for (auto& x : v) x = Round(dt, u(g));
  return v;
}

// A tensor in a kernel's dtype (f32 or bf16), written and read as floats.
struct Buf {
  weft::DType dt;
  std::vector<float> f;
  std::vector<__nv_bfloat16> h;
  Buf(weft::DType d, const std::vector<float>& v) : dt(d) {
    if (dt == weft::DType::kF32) {
      f = v;
    } else {
      for (float x : v) h.push_back(__float2bfloat16_rn(x));
    }
  }
  void* data() { return dt == weft::DType::kF32 ? static_cast<void*>(f.data()) : h.data(); }
  std::vector<float> Get() const {
    if (dt == weft::DType::kF32) return f;
    std::vector<float> r;
    for (auto x : h) r.push_back(__bfloat162float(x));
    return r;
  }
};

// max |got - want| / max |want| over the elements added: one scale per
// tensor, so an O(1) error cannot hide behind small entries. Infinities
// must match exactly (a mismatch, or a NaN, counts as an infinite error).
struct Err {
  double err = 0, scale = 1e-30;
  void Add(double got, double want) {
    if (std::isinf(want) || !std::isfinite(got)) {
      if (got != want) err = INFINITY;
      return;
    }
    err = std::max(err, std::fabs(got - want));
    scale = std::max(scale, std::fabs(want));
  }
  double Rel() const { return err / scale; }
};

inline const char* Name(weft::DType dt) { return dt == weft::DType::kBF16 ? "bf16" : "f32 "; }

inline void Ok(const absl::Status& st, const char* what) {
  if (!st.ok()) {
    printf("%s: %s\n", what, std::string(st.message()).c_str());
    std::exit(1);
  }
}

}  // namespace emu_check
