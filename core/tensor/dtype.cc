#include "core/tensor/dtype.h"

#include <cstring>

#include "core/base/errors.h"
#include "absl/strings/str_cat.h"

namespace weft {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
    case DType::kU16:
      return 2;
    case DType::kI64:
      return 8;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU16: return "u16";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64,
                  DType::kU16}) {
    if (name == DTypeName(d)) return d;
  }
  if (name == "fp32" || name == "float32") return DType::kF32;
  if (name == "bfloat16") return DType::kBF16;
  if (name == "fp16" || name == "float16") return DType::kF16;
  return InvalidArgument(absl::StrCat("unknown dtype '", name, "'"),
                         "one of f32, bf16, f16, i32, i64, u16");
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

uint16_t FloatToBf16Bits(float value) {
  uint32_t u = FloatBits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN, sign kept
  }
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even;
  // a carry out of the mantissa correctly bumps the exponent (up to inf).
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16BitsToFloat(uint16_t bits) { return BitsFloat(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToF16Bits(float value) {
  uint32_t u = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (or inf) rounds to inf
  if (u < 0x38800000u) {
    // Below 2^-14: result is a half subnormal in units of 2^-24.
    if (u <= 0x33000000u) return sign;  // <= 2^-25: ties to even go to zero
    const uint32_t exponent = u >> 23;
    const uint32_t mantissa = (u & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // value = mantissa * 2^-shift in 2^-24 units
    uint32_t result = mantissa >> shift;
    const uint32_t rem = mantissa & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  // Normal: rebias the exponent (127 -> 15), then round the 13 dropped bits.
  u -= 0x38000000u;
  u += 0x0fffu + ((u >> 13) & 1u);
  return sign | static_cast<uint16_t>(u >> 13);
}

float F16BitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return BitsFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return BitsFloat(sign);
    // Subnormal: normalize into a float, which has the range for it.
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3ffu;
    return BitsFloat(sign | (exponent << 23) | (mantissa << 13));
  }
  return BitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace weft
