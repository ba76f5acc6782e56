#include "data/idx_file.h"

#include <zlib.h>

#include <string>
#include <vector>

#include "data/file_util.h"
#include "data/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;

class IdxFileTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) { return JoinPath(dir_, name); }
  std::string dir_ = testing::MakeTempDir("idx");
};

TEST_F(IdxFileTest, GzipAndPlainRoundTrip) {
  std::vector<uint8_t> values(2 * 3 * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(i * 11);
  for (bool gzip : {true, false}) {
    const std::string path = Path(gzip ? "a.gz" : "a");
    ASSERT_TRUE(WriteIdxFile(path, {2, 3, 4}, values, gzip).ok());
    auto a = ReadIdxFile(path);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(a->values, values);
  }
}

TEST_F(IdxFileTest, BadMagicAndTypeAreRejected) {
  ASSERT_TRUE(WriteFileAtomically(Path("m"), std::string("\x01\x00\x08\x01\x00\x00\x00\x01x", 9))
                  .ok());
  auto a = ReadIdxFile(Path("m"));
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("not an IDX file"));

  ASSERT_TRUE(WriteFileAtomically(Path("t"), std::string("\x00\x00\x0D\x01\x00\x00\x00\x01xxxx", 12))
                  .ok());
  a = ReadIdxFile(Path("t"));
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("element type 0xd"));
}

TEST_F(IdxFileTest, TruncatedAndTrailingDataAreRejected) {
  const std::string header("\x00\x00\x08\x01\x00\x00\x00\x05", 8);
  ASSERT_TRUE(WriteFileAtomically(Path("short"), header + "abc").ok());
  auto a = ReadIdxFile(Path("short"));
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("truncated IDX file"));
  EXPECT_THAT(a.status().message(), HasSubstr("short"));

  ASSERT_TRUE(WriteFileAtomically(Path("long"), header + "abcdefg").ok());
  a = ReadIdxFile(Path("long"));
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("trailing bytes"));
}

// 16 x 2^30 x 2^30 bytes is 2^64: a product that wraps to 0 must not pass
// for an empty data section.
TEST_F(IdxFileTest, DimensionsThatOverflowAreRejected) {
  const std::string header("\x00\x00\x08\x03\x00\x00\x00\x10\x40\x00\x00\x00\x40\x00\x00\x00", 16);
  ASSERT_TRUE(WriteFileAtomically(Path("wrap"), header).ok());
  auto a = ReadIdxFile(Path("wrap"));
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("truncated IDX file"));
}

TEST_F(IdxFileTest, CutOffGzipStreamIsAnError) {
  std::vector<uint8_t> values(5000, 7);
  ASSERT_TRUE(WriteIdxFile(Path("full.gz"), {5000}, values).ok());
  std::string gz = *ReadFileToString(Path("full.gz"));
  ASSERT_TRUE(WriteFileAtomically(Path("cut.gz"), gz.substr(0, gz.size() / 2)).ok());
  auto a = ReadIdxFile(Path("cut.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("cut.gz"));
}

TEST_F(IdxFileTest, MissingFileIsNotFoundWithPackageHint) {
  auto a = ReadIdxFile(Path("none.gz"));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(a.status().message(), HasSubstr("dataset-fashion-mnist"));
}

}  // namespace
}  // namespace weft::data
