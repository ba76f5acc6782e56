#include "core/kernels/philox.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(PhiloxTest, KnownAnswer) {
  // Random123's known-answer vector for philox4x32_10 with all-zero
  // counter and key: 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
  const PhiloxOut r = Philox4x32(0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
}

TEST(PhiloxTest, UniformIsInRangeAndRoughlyUniform) {
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = PhiloxUniform(42, i);
    ASSERT_GE(u, 0.f);
    ASSERT_LT(u, 1.f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
}

TEST(PhiloxTest, DifferentSeedsGiveDifferentStreams) {
  int same = 0;
  for (int i = 0; i < 1000; ++i) same += PhiloxUniform(1, i) == PhiloxUniform(2, i);
  EXPECT_LT(same, 5);
}

}  // namespace
}  // namespace weft
