#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/tensor/cuda/copy_kernels.h"
#include "core/tensor/cuda/cuda_check.h"

namespace weft::cuda {
namespace {

// Passed by value: the kernel reads shapes and strides from constant space.
struct Layout {
  int ndim;
  int64_t shape[kMaxDims];
  int64_t dst_strides[kMaxDims];
  int64_t src_strides[kMaxDims];
};

// Float types convert through float, integer types through int64, so i64
// copies are exact and float casts round like the host code.
template <typename T> struct Conv;
template <> struct Conv<float> {
  __device__ static float ToF(float v) { return v; }
  __device__ static float FromF(float v) { return v; }
  __device__ static int64_t ToI(float v) { return static_cast<int64_t>(v); }
  __device__ static float FromI(int64_t v) { return static_cast<float>(v); }
  static constexpr bool kFloat = true;
};
template <> struct Conv<__nv_bfloat16> {
  __device__ static float ToF(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 FromF(float v) { return __float2bfloat16_rn(v); }
  __device__ static int64_t ToI(__nv_bfloat16 v) { return static_cast<int64_t>(ToF(v)); }
  __device__ static __nv_bfloat16 FromI(int64_t v) { return FromF(static_cast<float>(v)); }
  static constexpr bool kFloat = true;
};
template <> struct Conv<__half> {
  __device__ static float ToF(__half v) { return __half2float(v); }
  __device__ static __half FromF(float v) { return __float2half_rn(v); }
  __device__ static int64_t ToI(__half v) { return static_cast<int64_t>(ToF(v)); }
  __device__ static __half FromI(int64_t v) { return FromF(static_cast<float>(v)); }
  static constexpr bool kFloat = true;
};
template <typename I> struct ConvInt {
  __device__ static float ToF(I v) { return static_cast<float>(v); }
  __device__ static I FromF(float v) { return static_cast<I>(v); }
  __device__ static int64_t ToI(I v) { return static_cast<int64_t>(v); }
  __device__ static I FromI(int64_t v) { return static_cast<I>(v); }
  static constexpr bool kFloat = false;
};
template <> struct Conv<int32_t> : ConvInt<int32_t> {};
template <> struct Conv<int64_t> : ConvInt<int64_t> {};
template <> struct Conv<uint16_t> : ConvInt<uint16_t> {};

template <typename D, typename S>
__global__ void CopyStridedKernel(D* __restrict__ dst, const S* __restrict__ src, Layout l,
                                  int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, d_off = 0, s_off = 0;
    for (int k = l.ndim - 1; k >= 0; --k) {
      const int64_t idx = rem % l.shape[k];
      rem /= l.shape[k];
      d_off += idx * l.dst_strides[k];
      s_off += idx * l.src_strides[k];
    }
    if constexpr (Conv<D>::kFloat || Conv<S>::kFloat) {
      dst[d_off] = Conv<D>::FromF(Conv<S>::ToF(src[s_off]));
    } else {
      dst[d_off] = Conv<D>::FromI(Conv<S>::ToI(src[s_off]));
    }
  }
}

template <typename D, typename S>
absl::Status Launch(const StridedView& dst, const StridedView& src, const Layout& l,
                    int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  CopyStridedKernel<D, S><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
      static_cast<D*>(dst.data), static_cast<const S*>(src.data), l, n);
  WEFT_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template <typename D>
absl::Status DispatchSrc(const StridedView& dst, const StridedView& src, const Layout& l,
                         int64_t n, cudaStream_t stream) {
  switch (src.dtype) {
    case DType::kF32: return Launch<D, float>(dst, src, l, n, stream);
    case DType::kBF16: return Launch<D, __nv_bfloat16>(dst, src, l, n, stream);
    case DType::kF16: return Launch<D, __half>(dst, src, l, n, stream);
    case DType::kI32: return Launch<D, int32_t>(dst, src, l, n, stream);
    case DType::kI64: return Launch<D, int64_t>(dst, src, l, n, stream);
    case DType::kU16: return Launch<D, uint16_t>(dst, src, l, n, stream);
  }
  return absl::InternalError("unknown source dtype");
}

}  // namespace

absl::Status LaunchCopyStrided(const StridedView& dst, const StridedView& src,
                               cudaStream_t stream) {
  if (dst.ndim != src.ndim) return absl::InvalidArgumentError("copy between different ranks");
  Layout l{};
  l.ndim = dst.ndim;
  for (int i = 0; i < dst.ndim; ++i) {
    if (dst.shape[i] != src.shape[i]) {
      return absl::InvalidArgumentError(absl::StrCat("copy shape mismatch at dim ", i));
    }
    l.shape[i] = dst.shape[i];
    l.dst_strides[i] = dst.strides[i];
    l.src_strides[i] = src.strides[i];
  }
  const int64_t n = dst.numel();
  if (n == 0) return absl::OkStatus();
  switch (dst.dtype) {
    case DType::kF32: return DispatchSrc<float>(dst, src, l, n, stream);
    case DType::kBF16: return DispatchSrc<__nv_bfloat16>(dst, src, l, n, stream);
    case DType::kF16: return DispatchSrc<__half>(dst, src, l, n, stream);
    case DType::kI32: return DispatchSrc<int32_t>(dst, src, l, n, stream);
    case DType::kI64: return DispatchSrc<int64_t>(dst, src, l, n, stream);
    case DType::kU16: return DispatchSrc<uint16_t>(dst, src, l, n, stream);
  }
  return absl::InternalError("unknown destination dtype");
}

}  // namespace weft::cuda
