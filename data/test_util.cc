#include "data/test_util.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft::data::testing {

std::string MakeTempDir(absl::string_view name) {
  const char* root = std::getenv("TEST_TMPDIR");
  static std::atomic<int> counter{0};
  const std::string dir =
      absl::StrCat(root != nullptr ? root : "/tmp", "/", name, "_", counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string TestdataPath(absl::string_view name) { return absl::StrCat("data/testdata/", name); }

std::vector<FieldSpec> SyntheticDataset::fields() const {
  return {{"index", DType::kI32, {}}, {"payload", DType::kF32, {3}}};
}

absl::Status SyntheticDataset::Fill(int64_t index, absl::Span<void* const> dst) const {
  fills_.fetch_add(1);
  if (index == fail_at_) {
    return InvalidArgument(absl::StrCat("corrupt record ", index, " in synthetic.bin"),
                           "a valid record");
  }
  const int32_t i = static_cast<int32_t>(index);
  std::memcpy(dst[0], &i, sizeof(i));
  const float payload[3] = {float(i), float(i) + 0.5f, -float(i)};
  std::memcpy(dst[1], payload, sizeof(payload));
  return absl::OkStatus();
}

}  // namespace weft::data::testing
