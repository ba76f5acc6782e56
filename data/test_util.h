// Helpers for the data package's tests: scratch directories and a synthetic
// dataset whose samples encode their own index, so tests can check exactly
// which samples a batch holds.
#ifndef WEFT_DATA_TEST_UTIL_H_
#define WEFT_DATA_TEST_UTIL_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "data/dataset.h"

namespace weft::data::testing {

// A new empty directory under $TEST_TMPDIR (or /tmp).
std::string MakeTempDir(absl::string_view name);

// The repository-relative path of a file in data/testdata (tests run in the
// runfiles root).
std::string TestdataPath(absl::string_view name);

// Sample i: "index" int32 scalar = i, "payload" float32 [3] = {i, i + 0.5, -i}.
// Fill fails for index == fail_at with an error naming "synthetic.bin".
class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t num_samples() const override { return n_; }
  std::vector<FieldSpec> fields() const override;
  absl::Status Fill(int64_t index, absl::Span<void* const> dst) const override;
  std::string Describe() const override { return "synthetic dataset"; }
  int64_t fills() const { return fills_.load(); }

 private:
  int64_t n_;
  int64_t fail_at_;
  mutable std::atomic<int64_t> fills_{0};
};

}  // namespace weft::data::testing

#endif  // WEFT_DATA_TEST_UTIL_H_
