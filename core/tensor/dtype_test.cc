#include "core/tensor/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace weft {
namespace {

float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Reference rounding: choose the nearer of the two neighbours among
// `values` (sorted, non-negative, finite), ties to the even bit pattern.
uint16_t NearestEven(double x, const std::vector<std::pair<double, uint16_t>>& values,
                     double overflow_at, uint16_t inf_bits) {
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  const uint16_t sign = neg ? 0x8000 : 0;
  if (a >= overflow_at) return sign | inf_bits;
  auto it = std::lower_bound(values.begin(), values.end(), std::make_pair(a, uint16_t{0}));
  if (it == values.end()) return sign | values.back().second;  // between max and overflow
  if (it->first == a) return sign | it->second;
  const auto hi = *it;
  const auto lo = *(it - 1);
  const double dlo = a - lo.first, dhi = hi.first - a;
  if (dlo < dhi) return sign | lo.second;
  if (dhi < dlo) return sign | hi.second;
  return sign | ((lo.second & 1) == 0 ? lo.second : hi.second);
}

std::vector<std::pair<double, uint16_t>> FiniteNonNegative(float (*to_float)(uint16_t),
                                                          uint16_t inf_bits) {
  std::vector<std::pair<double, uint16_t>> v;
  for (uint32_t b = 0; b < inf_bits; ++b) v.push_back({to_float(uint16_t(b)), uint16_t(b)});
  return v;
}

std::vector<float> Samples() {
  std::mt19937 rng(7);
  std::vector<float> out;
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float f = BitsToFloat(bits(rng));
    if (std::isfinite(f)) out.push_back(f);
  }
  // Dense samples in the ranges where halves live (subnormals through max).
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  for (int e = -30; e <= 17; ++e) {
    for (int i = 0; i < 2000; ++i) out.push_back(std::ldexp(mant(rng), e) * (i % 2 ? -1 : 1));
  }
  return out;
}

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI32), 4u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeSize(DType::kU16), 2u);
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kU16}) {
    EXPECT_EQ(*ParseDType(DTypeName(d)), d);
  }
  EXPECT_EQ(ParseDType("f8").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DTypeTest, Bf16RoundTripIsExactForEveryValue) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = Bf16BitsToFloat(uint16_t(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(f))));
      continue;
    }
    ASSERT_EQ(FloatToBf16Bits(f), b) << std::hex << b;
  }
}

TEST(DTypeTest, F16RoundTripIsExactForEveryValue) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = F16BitsToFloat(uint16_t(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16BitsToFloat(FloatToF16Bits(f))));
      continue;
    }
    ASSERT_EQ(FloatToF16Bits(f), b) << std::hex << b;
  }
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between bf16 1.0 and 1.0078125: ties go to even (1.0).
  EXPECT_EQ(FloatToBf16Bits(1.0f + std::ldexp(1.f, -8)), 0x3f80);
  // 1.0078125 + 2^-8 is between 0x3f81 (odd) and 0x3f82: ties go to 0x3f82.
  EXPECT_EQ(FloatToBf16Bits(1.0078125f + std::ldexp(1.f, -8)), 0x3f82);
  // Just above a tie rounds up.
  EXPECT_EQ(FloatToBf16Bits(std::nextafter(1.0f + std::ldexp(1.f, -8), 2.f)), 0x3f81);
  const auto values = FiniteNonNegative(Bf16BitsToFloat, 0x7f80);
  // bf16 max is 0x7f7f; values at or beyond its midpoint with 2^128 round to inf.
  const double overflow = (double(Bf16BitsToFloat(0x7f7f)) + std::ldexp(1.0, 128)) / 2;
  for (float f : Samples()) {
    ASSERT_EQ(FloatToBf16Bits(f), NearestEven(f, values, overflow, 0x7f80)) << f;
  }
}

TEST(DTypeTest, F16RoundsToNearestEven) {
  EXPECT_EQ(FloatToF16Bits(1.0f + std::ldexp(1.f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(FloatToF16Bits(1.0f + 3 * std::ldexp(1.f, -11)), 0x3c02);
  EXPECT_EQ(FloatToF16Bits(65504.f), 0x7bff);
  EXPECT_EQ(FloatToF16Bits(65519.f), 0x7bff);
  EXPECT_EQ(FloatToF16Bits(65520.f), 0x7c00);  // the tie above max rounds to inf
  EXPECT_EQ(FloatToF16Bits(std::ldexp(1.f, -25)), 0x0000);  // tie with zero -> zero
  EXPECT_EQ(FloatToF16Bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToF16Bits(std::ldexp(1.f, -24)), 0x0001);  // smallest subnormal
  const auto values = FiniteNonNegative(F16BitsToFloat, 0x7c00);
  for (float f : Samples()) {
    ASSERT_EQ(FloatToF16Bits(f), NearestEven(f, values, 65520.0, 0x7c00)) << f;
  }
}

TEST(DTypeTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16Bits(inf), 0x7f80);
  EXPECT_EQ(FloatToBf16Bits(-inf), 0xff80);
  EXPECT_EQ(FloatToF16Bits(-inf), 0xfc00);
  EXPECT_EQ(FloatToF16Bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(std::nanf("")))));
  EXPECT_TRUE(std::isnan(F16BitsToFloat(FloatToF16Bits(std::nanf("")))));
  // A NaN whose payload sits only in the low bits must stay NaN, not become inf.
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(BitsToFloat(0x7f800001)))));
}

}  // namespace
}  // namespace weft
