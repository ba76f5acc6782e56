// Launchers for rotary position embedding fused with grouped-query packing
// (KernelOps RopeQkvForward / RopeQkvBackward): q (B, T, H*D), k and v
// (B, T, G*D) to attention's packed qkv (B, T, 3*H*D) and back. rope (P, D)
// f32 holds each position's cos (first D/2) then sin (last D/2). Activations
// are kF32 or kBF16; pointers are device memory on the current device. The
// caller (CudaKernelOps) has checked the shapes: D even, G dividing H,
// every position of `positions` in [0, P).
#ifndef WEFT_CORE_KERNELS_CUDA_ROPE_H_
#define WEFT_CORE_KERNELS_CUDA_ROPE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/kernels/token_chunks.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

struct RopeDims {
  int64_t b, t;
  int64_t h, g;  // query heads, K/V heads (G divides H)
  int64_t d;     // head size, even
};

// qkv: q head h rotated, k head h / (H/G) rotated, v head h / (H/G) copied.
// qkv must not overlap q, k or v.
absl::Status LaunchRopeQkvForward(void* qkv, const void* q, const void* k, const void* v,
                                  const float* rope, const TokenChunks& positions, DType dtype,
                                  const RopeDims& dims, cudaStream_t stream);

// The transpose: dq, dk, dv overwritten; a K/V head's gradient sums its H/G
// query heads' in head order, then rotates back.
absl::Status LaunchRopeQkvBackward(void* dq, void* dk, void* dv, const void* dqkv,
                                   const float* rope, const TokenChunks& positions, DType dtype,
                                   const RopeDims& dims, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ROPE_H_
