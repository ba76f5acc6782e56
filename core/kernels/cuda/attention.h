// Causal self-attention launchers. qkv (B, T, 3C) packs q | k | v and head h
// uses columns [h*HS, (h+1)*HS) of each; out (B, T, C); lse (B, NH, T) f32 is
// the natural-log logsumexp of each row's scaled scores (scale 1/sqrt(HS)).
//
// bf16 with HS in {32, 64, 128} and 16-byte aligned operands runs the
// flash kernels (tensor cores, no T x T matrix in memory). Everything else
// (f32, other head sizes up to 256) runs simple warp-per-row kernels that
// are exact in f32 and also never store the T x T matrix. Both backward
// paths are deterministic (no atomics).
#ifndef WEFT_CORE_KERNELS_CUDA_ATTENTION_H_
#define WEFT_CORE_KERNELS_CUDA_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/kernels/token_chunks.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

constexpr int64_t kMaxAttentionHeadSize = 256;

// True when the tensor-core kernels handle this call.
bool FlashAttentionApplies(DType dtype, int64_t head_size,
                           std::initializer_list<const void*> ptrs);

absl::Status LaunchAttentionForward(void* out, float* lse, const void* qkv, DType dtype,
                                    int64_t batch, int64_t seq, int64_t num_heads,
                                    int64_t head_size, cudaStream_t stream);

// Floats of device scratch LaunchAttentionBackward needs: B * NH * T, plus
// the flash backward's workspace for the tiling WEFT_FLASH_BWD_TILING picks
// (an error when it names none).
absl::StatusOr<int64_t> AttentionBackwardScratchFloats(DType dtype, int64_t batch, int64_t seq,
                                                       int64_t num_heads, int64_t head_size);

// dqkv (B, T, 3C) is overwritten; scratch holds scratch_floats floats, at
// least AttentionBackwardScratchFloats (fewer is an error).
absl::Status LaunchAttentionBackward(void* dqkv, const void* dout, const void* qkv,
                                     const void* out, const float* lse, DType dtype,
                                     int64_t batch, int64_t seq, int64_t num_heads,
                                     int64_t head_size, float* scratch, int64_t scratch_floats,
                                     cudaStream_t stream);

// Blockwise attention for ring attention (KernelOps::AttentionBlockForward):
// q (B, Tq, q_width) with queries in its first C columns, kv (B, Tk,
// kv_width) with k, v at columns C, 2C (kv_width 3C) or 0, C (2C); out
// (B, Tq, C) and lse (B, NH, Tq) merged with the block (or overwritten
// without accumulate). bf16 with HS 32, 64 or 128 and 16-byte aligned rows
// runs tensor-core kernels; the rest warp-per-row kernels, HS <= 256.
struct BlockAttentionArgs {
  int64_t b, tq, tk, nh, hs, q_width, kv_width;
  TokenChunks q_chunks, kv_chunks;
};
absl::Status LaunchAttentionBlockForward(void* out, float* lse, const void* q, const void* kv,
                                         DType dtype, const BlockAttentionArgs& args,
                                         bool accumulate, cudaStream_t stream);
// dq (like q) += and dkv (like kv) +=, given the merged out and lse;
// scratch holds B * NH * Tq floats.
absl::Status LaunchAttentionBlockBackward(void* dq, void* dkv, const void* dout, const void* q,
                                          const void* kv, const void* out, const float* lse,
                                          DType dtype, const BlockAttentionArgs& args,
                                          float* scratch, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ATTENTION_H_
