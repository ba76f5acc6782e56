#include "comm/testing/expect.h"

#include <cmath>

namespace weft::comm::testing {

absl::Status ExpectFloats(const Tensor& t, absl::Span<const float> expected,
                          absl::string_view what) {
  auto got = t.ToFloats();
  if (!got.ok()) return got.status();
  if (got->size() != expected.size()) {
    return absl::InternalError(absl::StrCat(what, ": got ", got->size(), " elements, expected ",
                                            expected.size()));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const float g = (*got)[i];
    const float e = expected[i];
    const bool same = (std::isnan(g) && std::isnan(e)) || g == e;
    if (!same) {
      return absl::InternalError(
          absl::StrCat(what, ": element ", i, " is ", g, ", expected ", e));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> MakeTensor(DType dtype, absl::Span<const double> values, Shape shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  switch (dtype) {
    case DType::kF32:
    case DType::kBF16:
    case DType::kF16: {
      std::vector<float> f(values.begin(), values.end());
      return Tensor::FromFloats(f, shape, dtype);
    }
    case DType::kI32: {
      std::vector<int32_t> v(values.begin(), values.end());
      return Tensor::FromVector<int32_t>(v, shape);
    }
    case DType::kI64: {
      std::vector<int64_t> v(values.begin(), values.end());
      return Tensor::FromVector<int64_t>(v, shape);
    }
    case DType::kU16: {
      std::vector<uint16_t> v(values.begin(), values.end());
      return Tensor::FromVector<uint16_t>(v, shape);
    }
  }
  return absl::InvalidArgumentError("MakeTensor: unknown dtype");
}

absl::Status ExpectTensor(const Tensor& t, absl::Span<const double> expected,
                          absl::string_view what) {
  const std::string label = absl::StrCat(what, " (", DTypeName(t.dtype()), ")");
  switch (t.dtype()) {
    case DType::kF32:
    case DType::kBF16:
    case DType::kF16: {
      // Round the expectation exactly as the tensor stores values.
      auto rounded = MakeTensor(t.dtype(), expected);
      if (!rounded.ok()) return rounded.status();
      auto want = rounded->ToFloats();
      if (!want.ok()) return want.status();
      return ExpectFloats(t, *want, label);
    }
    case DType::kI32: {
      std::vector<int32_t> v(expected.begin(), expected.end());
      return ExpectValues<int32_t>(t, v, label);
    }
    case DType::kI64: {
      std::vector<int64_t> v(expected.begin(), expected.end());
      return ExpectValues<int64_t>(t, v, label);
    }
    case DType::kU16: {
      std::vector<uint16_t> v(expected.begin(), expected.end());
      return ExpectValues<uint16_t>(t, v, label);
    }
  }
  return absl::InvalidArgumentError("ExpectTensor: unknown dtype");
}

absl::Status ExpectTrue(bool condition, absl::string_view message) {
  return condition ? absl::OkStatus() : absl::InternalError(message);
}

}  // namespace weft::comm::testing
