#include "tools/estimate/budget.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(ParseByteSizeTest, UnitsAndPlainBytes) {
  EXPECT_EQ(*ParseByteSize("1048576"), 1048576);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512LL << 20);
  EXPECT_EQ(*ParseByteSize("80GiB"), 80LL << 30);
  EXPECT_EQ(*ParseByteSize("80g"), 80LL << 30);
  EXPECT_EQ(*ParseByteSize("1.5GB"), 1500000000LL);
  EXPECT_EQ(*ParseByteSize("64 KiB"), 65536);
  EXPECT_EQ(*ParseByteSize("80B"), 80);  // said so
}

// --memory_budget=80 was 80 bytes, shown as "0.0 MiB": it meant 80 GiB.
TEST(ParseByteSizeTest, ASmallBareNumberNeedsItsUnit) {
  absl::StatusOr<int64_t> r = ParseByteSize("80");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'80' without a unit: 80 bytes"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("--memory_budget=80GiB"), std::string::npos) << r.status();
}

TEST(ParseByteSizeTest, RejectsNonsenseWithAHint) {
  for (const char* bad : {"", "GiB", "-1GiB", "lots", "0"}) {
    absl::StatusOr<int64_t> r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("80GiB"), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace weft
