#include "core/tensor/cpu_copy.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {
namespace {

// Element value as a double-free intermediate: floats go through float,
// integers through int64, so i64 values above 2^24 survive i64 -> i64 copies.
template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static float Load(const void* p) { return *static_cast<const float*>(p); }
  static void Store(void* p, float v) { *static_cast<float*>(p) = v; }
};
template <>
struct Elem<BFloat16> {
  static float Load(const void* p) { return Bf16BitsToFloat(*static_cast<const uint16_t*>(p)); }
  static void Store(void* p, float v) { *static_cast<uint16_t*>(p) = FloatToBf16Bits(v); }
};
template <>
struct Elem<Float16> {
  static float Load(const void* p) { return F16BitsToFloat(*static_cast<const uint16_t*>(p)); }
  static void Store(void* p, float v) { *static_cast<uint16_t*>(p) = FloatToF16Bits(v); }
};

float LoadAsFloat(DType t, const void* p) {
  switch (t) {
    case DType::kF32: return Elem<float>::Load(p);
    case DType::kBF16: return Elem<BFloat16>::Load(p);
    case DType::kF16: return Elem<Float16>::Load(p);
    case DType::kI32: return static_cast<float>(*static_cast<const int32_t*>(p));
    case DType::kI64: return static_cast<float>(*static_cast<const int64_t*>(p));
    case DType::kU16: return static_cast<float>(*static_cast<const uint16_t*>(p));
  }
  return 0.f;
}

int64_t LoadAsInt(DType t, const void* p) {
  switch (t) {
    case DType::kI32: return *static_cast<const int32_t*>(p);
    case DType::kI64: return *static_cast<const int64_t*>(p);
    case DType::kU16: return *static_cast<const uint16_t*>(p);
    default: return static_cast<int64_t>(LoadAsFloat(t, p));
  }
}

void StoreConverted(DType dt, void* d, DType st, const void* s) {
  switch (dt) {
    case DType::kF32: Elem<float>::Store(d, LoadAsFloat(st, s)); break;
    case DType::kBF16: Elem<BFloat16>::Store(d, LoadAsFloat(st, s)); break;
    case DType::kF16: Elem<Float16>::Store(d, LoadAsFloat(st, s)); break;
    case DType::kI32: *static_cast<int32_t*>(d) = static_cast<int32_t>(LoadAsInt(st, s)); break;
    case DType::kI64: *static_cast<int64_t*>(d) = LoadAsInt(st, s); break;
    case DType::kU16: *static_cast<uint16_t*>(d) = static_cast<uint16_t>(LoadAsInt(st, s)); break;
  }
}

}  // namespace

absl::Status CpuCopyStrided(const StridedView& dst, const StridedView& src) {
  if (dst.ndim != src.ndim) {
    return InvalidArgument(absl::StrCat("copy between ranks ", src.ndim, " and ", dst.ndim),
                           "equal ranks");
  }
  for (int i = 0; i < dst.ndim; ++i) {
    if (dst.shape[i] != src.shape[i]) {
      return InvalidArgument(absl::StrCat("copy shape mismatch at dim ", i, ": ", src.shape[i],
                                          " vs ", dst.shape[i]),
                             "equal shapes");
    }
  }
  const int64_t n = dst.numel();
  if (n == 0) return absl::OkStatus();
  const size_t ds = DTypeSize(dst.dtype), ss = DTypeSize(src.dtype);
  if (dst.dtype == src.dtype && dst.contiguous() && src.contiguous()) {
    std::memmove(dst.data, src.data, static_cast<size_t>(n) * ds);
    return absl::OkStatus();
  }
  // Odometer over the index space; the innermost dim advances fastest.
  int64_t index[kMaxDims] = {};
  char* d = static_cast<char*>(dst.data);
  const char* s = static_cast<const char*>(src.data);
  const int last = dst.ndim - 1;
  for (int64_t done = 0; done < n;) {
    int64_t d_off = 0, s_off = 0;
    for (int i = 0; i < last; ++i) {
      d_off += index[i] * dst.strides[i];
      s_off += index[i] * src.strides[i];
    }
    const int64_t inner = last >= 0 ? dst.shape[last] : 1;
    const int64_t d_step = last >= 0 ? dst.strides[last] : 0;
    const int64_t s_step = last >= 0 ? src.strides[last] : 0;
    for (int64_t j = 0; j < inner; ++j) {
      void* dp = d + (d_off + j * d_step) * static_cast<int64_t>(ds);
      const void* sp = s + (s_off + j * s_step) * static_cast<int64_t>(ss);
      if (dst.dtype == src.dtype) {
        std::memcpy(dp, sp, ds);
      } else {
        StoreConverted(dst.dtype, dp, src.dtype, sp);
      }
    }
    done += inner;
    for (int i = last - 1; i >= 0; --i) {
      if (++index[i] < dst.shape[i]) break;
      index[i] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace weft
