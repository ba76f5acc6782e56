// Status-returning checks for rank functions (multiprocess.h): they work
// the same in threads and in forked processes, and name the first element
// that differs.
//
//   WEFT_RETURN_IF_ERROR(ExpectFloats(out, {6, 8, 10}, "all_reduce sum"));
#ifndef WEFT_COMM_TESTING_EXPECT_H_
#define WEFT_COMM_TESTING_EXPECT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/tensor/tensor.h"

namespace weft::comm::testing {

// Exact comparison of any floating-point tensor (converted to float).
absl::Status ExpectFloats(const Tensor& t, absl::Span<const float> expected,
                          absl::string_view what);

// Exact comparison of an integer (or raw u16) tensor.
template <typename T>
absl::Status ExpectValues(const Tensor& t, absl::Span<const T> expected, absl::string_view what) {
  auto got = t.ToVector<T>();
  if (!got.ok()) return got.status();
  if (got->size() != expected.size()) {
    return absl::InternalError(absl::StrCat(what, ": got ", got->size(), " elements, expected ",
                                            expected.size()));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if ((*got)[i] != expected[i]) {
      return absl::InternalError(absl::StrCat(what, ": element ", i, " is ", (*got)[i],
                                              ", expected ", expected[i]));
    }
  }
  return absl::OkStatus();
}

// A host tensor of `dtype` holding `values` (1-D unless `shape` is given);
// float dtypes round to nearest even, integer dtypes truncate.
absl::StatusOr<Tensor> MakeTensor(DType dtype, absl::Span<const double> values, Shape shape = {});

// Exact comparison against `expected` as the dtype stores it: each expected
// value is rounded to the tensor's dtype first (bf16/f16/integers), so
// callers write the mathematical result.
absl::Status ExpectTensor(const Tensor& t, absl::Span<const double> expected,
                          absl::string_view what);

// Fails with `message` when `condition` is false.
absl::Status ExpectTrue(bool condition, absl::string_view message);

}  // namespace weft::comm::testing

#endif  // WEFT_COMM_TESTING_EXPECT_H_
