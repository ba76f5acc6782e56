#include "comm/gloo/reduce_kernels.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/base/check.h"

namespace weft::comm::gloo_internal {
namespace {

template <typename T>
T Combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return a + b;
      case ReduceOp::kMax:
        return (std::isnan(a) || std::isnan(b)) ? NAN : (a < b ? b : a);
      case ReduceOp::kMin:
        return (std::isnan(a) || std::isnan(b)) ? NAN : (b < a ? b : a);
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::kMax:
        return a < b ? b : a;
      case ReduceOp::kMin:
        return b < a ? b : a;
    }
  }
  return a;
}

// f32 and the integers: accumulate in the element type, block by block.
template <typename T>
void ReduceNative(ReduceOp op, const T* blocks, int n, int64_t count, T* out) {
  std::memcpy(out, blocks, static_cast<size_t>(count) * sizeof(T));
  for (int b = 1; b < n; ++b) {
    const T* in = blocks + static_cast<int64_t>(b) * count;
    for (int64_t i = 0; i < count; ++i) out[i] = Combine(op, out[i], in[i]);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (op == ReduceOp::kAvg) {
      for (int64_t i = 0; i < count; ++i) out[i] = out[i] / static_cast<T>(n);
    }
  }
}

// bf16/f16: accumulate in float, round once.
void ReduceHalf(ReduceOp op, const uint16_t* blocks, int n, int64_t count, uint16_t* out,
                float (*to_float)(uint16_t), uint16_t (*from_float)(float)) {
  std::vector<float> acc(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) acc[i] = to_float(blocks[i]);
  for (int b = 1; b < n; ++b) {
    const uint16_t* in = blocks + static_cast<int64_t>(b) * count;
    for (int64_t i = 0; i < count; ++i) acc[i] = Combine(op, acc[i], to_float(in[i]));
  }
  const float scale = op == ReduceOp::kAvg ? static_cast<float>(n) : 1.0f;
  for (int64_t i = 0; i < count; ++i) {
    out[i] = from_float(op == ReduceOp::kAvg ? acc[i] / scale : acc[i]);
  }
}

}  // namespace

void ReduceBlocks(DType dtype, ReduceOp op, const void* blocks, int n, int64_t count, void* out) {
  WEFT_CHECK_GE(n, 1);
  if (count == 0) return;
  switch (dtype) {
    case DType::kF32:
      return ReduceNative(op, static_cast<const float*>(blocks), n, count,
                          static_cast<float*>(out));
    case DType::kI32:
      return ReduceNative(op, static_cast<const int32_t*>(blocks), n, count,
                          static_cast<int32_t*>(out));
    case DType::kI64:
      return ReduceNative(op, static_cast<const int64_t*>(blocks), n, count,
                          static_cast<int64_t*>(out));
    case DType::kBF16:
      return ReduceHalf(op, static_cast<const uint16_t*>(blocks), n, count,
                        static_cast<uint16_t*>(out), Bf16BitsToFloat, FloatToBf16Bits);
    case DType::kF16:
      return ReduceHalf(op, static_cast<const uint16_t*>(blocks), n, count,
                        static_cast<uint16_t*>(out), F16BitsToFloat, FloatToF16Bits);
    case DType::kU16:
      break;
  }
  WEFT_CHECK(false) << "ReduceBlocks on " << DTypeName(dtype);
}

}  // namespace weft::comm::gloo_internal
