// Element types weft tensors can hold, and host-side conversions between the
// floating-point ones. bf16 and f16 are stored as raw uint16 bits on the host;
// conversions from float round to nearest, ties to even (like CUDA's
// __float2bfloat16 / __float2half), so CPU and GPU agree bit for bit.
#ifndef WEFT_CORE_TENSOR_DTYPE_H_
#define WEFT_CORE_TENSOR_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace weft {

enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kI64, kU16 };

size_t DTypeSize(DType dtype);
absl::string_view DTypeName(DType dtype);  // "f32", "bf16", ...
absl::StatusOr<DType> ParseDType(absl::string_view name);
bool IsFloatingPoint(DType dtype);

// Host storage types for the 16-bit floats: distinct types so templates can
// dispatch on them, layout-compatible with the device's __nv_bfloat16/__half.
struct BFloat16 {
  uint16_t bits;
};
struct Float16 {
  uint16_t bits;
};

uint16_t FloatToBf16Bits(float value);
float Bf16BitsToFloat(uint16_t bits);
uint16_t FloatToF16Bits(float value);
float F16BitsToFloat(uint16_t bits);

inline BFloat16 ToBf16(float v) { return {FloatToBf16Bits(v)}; }
inline Float16 ToF16(float v) { return {FloatToF16Bits(v)}; }
inline float ToFloat(BFloat16 v) { return Bf16BitsToFloat(v.bits); }
inline float ToFloat(Float16 v) { return F16BitsToFloat(v.bits); }
inline float ToFloat(float v) { return v; }

// Maps a C++ element type to its DType (static).
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBF16;
};
template <>
struct DTypeOf<Float16> {
  static constexpr DType value = DType::kF16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::kU16;
};

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_DTYPE_H_
