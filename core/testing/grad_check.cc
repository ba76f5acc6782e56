#include "core/testing/grad_check.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "core/base/check.h"
#include "core/base/status_macros.h"

namespace weft::testing {

Tensor RandomTensor(Shape shape, uint64_t seed, float scale) {
  Tensor t = *Tensor::Empty(std::move(shape), DType::kF32);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

Tensor FilledTensor(Shape shape, float value) {
  Tensor t = *Tensor::Empty(std::move(shape), DType::kF32);
  std::fill(t.data<float>(), t.data<float>() + t.numel(), value);
  return t;
}

std::vector<float> Values(const Tensor& t) {
  WEFT_CHECK(t.device().is_cpu() && t.dtype() == DType::kF32 && t.is_contiguous());
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

std::vector<float> NumericalGradient(Tensor& x, const std::function<double()>& loss,
                                     float step) {
  WEFT_CHECK(x.dtype() == DType::kF32 && x.is_contiguous());
  std::vector<float> grad(x.numel());
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float saved = p[i];
    p[i] = saved + step;
    const double up = loss();
    p[i] = saved - step;
    const double down = loss();
    p[i] = saved;
    grad[i] = static_cast<float>((up - down) / (2.0 * step));
  }
  return grad;
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  WEFT_CHECK_EQ(a.size(), b.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += double(a[i] - b[i]) * double(a[i] - b[i]);
    norm += double(b[i]) * double(b[i]);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-12);
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  WEFT_CHECK_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

double WeightedSum(const Tensor& out, const Tensor& weights) {
  WEFT_CHECK_EQ(out.numel(), weights.numel());
  double s = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    s += double(out.data<float>()[i]) * double(weights.data<float>()[i]);
  }
  return s;
}

absl::Status CheckNear(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  WEFT_ASSIGN_OR_RETURN(std::vector<float> a, got.ToFloats());
  WEFT_ASSIGN_OR_RETURN(std::vector<float> b, want.ToFloats());
  if (a.size() != b.size()) return absl::InternalError(what + ": sizes differ");
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(a[i] - b[i]) > tol * std::max(1.0f, std::fabs(b[i]))) {
      return absl::InternalError(what + " element " + std::to_string(i) + ": " +
                                 std::to_string(a[i]) + " vs " + std::to_string(b[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::testing
