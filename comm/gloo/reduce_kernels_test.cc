#include "comm/gloo/reduce_kernels.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace weft::comm::gloo_internal {
namespace {

TEST(ReduceKernelsTest, F32SumIsInRankOrder) {
  // (1e8 + 1) - 1e8 differs from 1e8 - 1e8 + 1 in float: rank order is fixed.
  const std::vector<float> blocks = {1e8f, 1.0f, -1e8f};
  float out = 0;
  ReduceBlocks(DType::kF32, ReduceOp::kSum, blocks.data(), 3, 1, &out);
  EXPECT_EQ(out, (1e8f + 1.0f) + -1e8f);
}

TEST(ReduceKernelsTest, Bf16AccumulatesInFloatAndRoundsOnce) {
  // Pairwise bf16 rounding would give 256 (256 + 1 rounds back to 256 twice).
  const std::vector<uint16_t> blocks = {FloatToBf16Bits(256), FloatToBf16Bits(1),
                                        FloatToBf16Bits(1)};
  uint16_t out = 0;
  ReduceBlocks(DType::kBF16, ReduceOp::kSum, blocks.data(), 3, 1, &out);
  EXPECT_EQ(Bf16BitsToFloat(out), 258.0f);
  ReduceBlocks(DType::kBF16, ReduceOp::kAvg, blocks.data(), 3, 1, &out);
  EXPECT_EQ(out, FloatToBf16Bits(258.0f / 3.0f));
}

TEST(ReduceKernelsTest, F16MaxMin) {
  const std::vector<uint16_t> blocks = {FloatToF16Bits(1.5f), FloatToF16Bits(-2.0f),
                                        FloatToF16Bits(3.0f), FloatToF16Bits(0.5f)};
  uint16_t out[2];
  ReduceBlocks(DType::kF16, ReduceOp::kMax, blocks.data(), 2, 2, out);
  EXPECT_EQ(F16BitsToFloat(out[0]), 3.0f);
  EXPECT_EQ(F16BitsToFloat(out[1]), 0.5f);
  ReduceBlocks(DType::kF16, ReduceOp::kMin, blocks.data(), 2, 2, out);
  EXPECT_EQ(F16BitsToFloat(out[0]), 1.5f);
  EXPECT_EQ(F16BitsToFloat(out[1]), -2.0f);
}

TEST(ReduceKernelsTest, MaxAndMinPropagateNaN) {
  const std::vector<float> blocks = {1.0f, NAN, NAN, 2.0f};
  float out[2];
  ReduceBlocks(DType::kF32, ReduceOp::kMax, blocks.data(), 2, 2, out);
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
  ReduceBlocks(DType::kF32, ReduceOp::kMin, blocks.data(), 2, 2, out);
  EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]));
}

TEST(ReduceKernelsTest, IntegersWrapAndCompare) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> blocks = {big, -5, 1, 7};
  int64_t out[2];
  ReduceBlocks(DType::kI64, ReduceOp::kSum, blocks.data(), 2, 2, out);
  EXPECT_EQ(out[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(out[1], 2);
  const std::vector<int32_t> i32 = {3, -9, 4, -10};
  int32_t o32[2];
  ReduceBlocks(DType::kI32, ReduceOp::kMin, i32.data(), 2, 2, o32);
  EXPECT_EQ(o32[0], 3);
  EXPECT_EQ(o32[1], -10);
}

TEST(ReduceKernelsTest, F32Avg) {
  const std::vector<float> blocks = {1, 2, 4, 8, 16, 32};
  float out[2];
  ReduceBlocks(DType::kF32, ReduceOp::kAvg, blocks.data(), 3, 2, out);
  EXPECT_EQ(out[0], 21.0f / 3.0f);
  EXPECT_EQ(out[1], 42.0f / 3.0f);
}

}  // namespace
}  // namespace weft::comm::gloo_internal
