// Launchers shared between the attention kernel files; the public entry
// points are in attention.h. All take qkv (B, T, 3C) packed as q | k | v,
// head h at columns [h*HS, (h+1)*HS) of each third, on the current device.
#ifndef WEFT_CORE_KERNELS_CUDA_ATTENTION_INTERNAL_H_
#define WEFT_CORE_KERNELS_CUDA_ATTENTION_INTERNAL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "core/kernels/cuda/attention.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

struct AttentionDims {
  int64_t b, t, nh, hs;
  int64_t c() const { return nh * hs; }
};

// bf16 flash kernels (tensor cores); HS in {32, 64, 128} and 16-byte
// aligned base pointers (attention.cc checks with FlashAttentionApplies).
absl::Status LaunchFlashForward(void* out, float* lse, const void* qkv, const AttentionDims& d,
                                cudaStream_t stream);
// dsum (B, NH, T) holds rowsum(dout * out) from LaunchAttentionRowDot.
absl::Status LaunchFlashBackward(void* dqkv, const void* dout, const void* qkv, const float* lse,
                                 const float* dsum, const AttentionDims& d, cudaStream_t stream);

// Simple warp-per-row kernels for any dtype and HS <= 256 (f32 path and
// fallback): exact softmax in f32 with expf, no tensor cores.
absl::Status LaunchSimpleForward(void* out, float* lse, const void* qkv, DType dtype,
                                 const AttentionDims& d, cudaStream_t stream);
absl::Status LaunchSimpleBackward(void* dqkv, const void* dout, const void* qkv,
                                  const float* lse, const float* dsum, DType dtype,
                                  const AttentionDims& d, cudaStream_t stream);

// Blockwise (ring) attention on tensor cores (attention_flash_block_*.cu):
// bf16, HS in {32, 64, 128}, rows of q and kv 16-byte aligned.
bool FlashBlockAttentionApplies(DType dtype, const BlockAttentionArgs& a,
                                std::initializer_list<const void*> pointers);
absl::Status LaunchFlashBlockForward(void* out, float* lse, const void* q, const void* kv,
                                     const BlockAttentionArgs& a, bool accumulate,
                                     cudaStream_t stream);
// dq (like q) += and dkv (like kv) +=; dsum (B, NH, Tq) from
// LaunchAttentionRowDot over the merged output.
absl::Status LaunchFlashBlockBackward(void* dq, void* dkv, const void* dout, const void* q,
                                      const void* kv, const float* lse, const float* dsum,
                                      const BlockAttentionArgs& a, cudaStream_t stream);

// dsum[b, h, i] = sum_d dout[b, i, h*HS + d] * out[b, i, h*HS + d] (f32).
absl::Status LaunchAttentionRowDot(float* dsum, const void* dout, const void* out, DType dtype,
                                   const AttentionDims& d, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ATTENTION_INTERNAL_H_
