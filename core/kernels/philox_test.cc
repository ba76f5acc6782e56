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

TEST(PhiloxTest, KnownAnswerWithAll128CounterBits) {
  // Random123's philox4x32_10 vector with counter 243f6a88 85a308d3
  // 13198a2e 03707344 and key a4093822 299f31d0 (digits of pi): the high
  // counter half is where dropout puts the sample.
  const PhiloxOut r =
      Philox4x32(0x85a308d3243f6a88ull, 0x299f31d0a4093822ull, 0x0370734413198a2eull);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

TEST(PhiloxTest, DropoutCursorMatchesDropoutKeepAcrossSampleEnds) {
  const DropoutKey key{.seed = 5, .offset = 17, .sample_size = 10, .first_sample = 3,
                       .sample_stride = 4};
  DropoutCursor at(key, 2);
  for (uint64_t i = 2; i < 200; ++i, at.Next()) {
    ASSERT_EQ(at.Keep(0.5f), DropoutKeep(key, i, 0.5f)) << i;
    const uint64_t g = 17 + i;
    ASSERT_EQ(at.sample, 3 + 4 * (g / 10)) << i;
    ASSERT_EQ(at.within, g % 10) << i;
  }
  // Without samples the counter is the element's offset, as before.
  const DropoutKey flat{.seed = 5, .offset = 17};
  for (uint64_t i = 0; i < 50; ++i) {
    ASSERT_EQ(DropoutKeep(flat, i, 0.5f), PhiloxUniform(5, 17 + i) >= 0.5f);
  }
}

// A key whose step seed lives in memory draws what the resolved key draws,
// through DropoutKeep and DropoutCursor alike (they used to ignore it and
// draw from the base seed alone).
TEST(PhiloxTest, SeedInMemoryIsAppliedByKeepAndCursor) {
  const uint64_t step = 0x1234;
  const DropoutKey in_memory{.seed = 5, .sample_size = 10, .seed_in_memory = &step};
  const DropoutKey resolved{.seed = 5 ^ step, .sample_size = 10};
  const DropoutKey base{.seed = 5, .sample_size = 10};
  DropoutCursor at(in_memory, 0);
  int differs_from_base = 0;
  for (uint64_t i = 0; i < 100; ++i, at.Next()) {
    ASSERT_EQ(DropoutKeep(in_memory, i, 0.5f), DropoutKeep(resolved, i, 0.5f)) << i;
    ASSERT_EQ(at.Keep(0.5f), DropoutKeep(resolved, i, 0.5f)) << i;
    differs_from_base += DropoutKeep(in_memory, i, 0.5f) != DropoutKeep(base, i, 0.5f);
  }
  EXPECT_GT(differs_from_base, 10) << "the seed in memory changed nothing";
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
