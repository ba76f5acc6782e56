// Test helpers for finite-difference gradient checks and random tensors.
//
//   Tensor x = RandomTensor({4, 8}, /*seed=*/1);
//   auto loss = [&] { ...forward, return sum(out * r) as double... };
//   std::vector<float> numeric = NumericalGradient(x, loss);
//   EXPECT_LT(RelativeError(analytic, numeric), 1e-2);
#ifndef WEFT_CORE_TESTING_GRAD_CHECK_H_
#define WEFT_CORE_TESTING_GRAD_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "core/tensor/tensor.h"

namespace weft::testing {

// f32 CPU tensor with entries uniform in [-scale, scale).
Tensor RandomTensor(Shape shape, uint64_t seed, float scale = 1.0f);
// f32 CPU tensor filled with `value`.
Tensor FilledTensor(Shape shape, float value);
// Contents of an f32 CPU tensor.
std::vector<float> Values(const Tensor& t);

// Central differences of `loss` with respect to every element of the f32 CPU
// tensor `x`, which is perturbed in place and restored.
std::vector<float> NumericalGradient(Tensor& x, const std::function<double()>& loss,
                                     float step = 1e-2f);

// ||a - b|| / max(||b||, 1e-12): scale-free, robust to a few noisy entries.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b);
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);

// OK when every element of `got` is within tol * max(1, |want|) of
// `want`'s (any device: both are read to the host); otherwise an error
// naming `what`, the first element off and both values.
absl::Status CheckNear(const Tensor& got, const Tensor& want, double tol, const std::string& what);

// sum(out * weights) in double: a scalar loss whose gradient wrt out is weights.
double WeightedSum(const Tensor& out, const Tensor& weights);

}  // namespace weft::testing

#endif  // WEFT_CORE_TESTING_GRAD_CHECK_H_
