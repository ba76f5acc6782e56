// Launchers shared between the attention kernel files; the public entry
// points are in attention.h. All take qkv (B, T, 3C) packed as q | k | v,
// head h at columns [h*HS, (h+1)*HS) of each third, on the current device.
#ifndef WEFT_CORE_KERNELS_CUDA_ATTENTION_INTERNAL_H_
#define WEFT_CORE_KERNELS_CUDA_ATTENTION_INTERNAL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/kernels/cuda/attention.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

struct AttentionDims {
  int64_t b, t, nh, hs;
  int64_t c() const { return nh * hs; }
};

// How a flash kernel splits the query rows of a block over its warps:
// `warps` warps of `rows_per_warp` rows (16 or 32: one or two mma row
// tiles). Bigger blocks read each key/value tile once for more rows. With
// `wgmma` the kernels run on Hopper's warpgroup instructions instead of
// mma.sync (attention_flash_{fwd,bwd}_wgmma.cu): warps / 4 warpgroups of
// 64 rows; with `n_major` as well, their second products read B N-major
// through the transpose bit instead of transposing tiles; with `pipelined`
// the products of one tile run behind the softmax or gradients of the next
// (attention_flash_{fwd,bwd}_wgmma.cu); `key_tile` 128 (forward only) takes
// 128 keys per tile instead of 64; `fused_dq` (backward only, "fused-dq")
// computes dQ inside the dK/dV kernel instead of a second kernel that
// recomputes S and dP (attention_flash_bwd.cu).
struct FlashTiling {
  int warps = 4;
  int rows_per_warp = 16;
  bool wgmma = false;
  bool n_major = false;
  bool pipelined = false;
  int key_tile = 64;  // keys per tile: 128 in the pipelined wgmma forward's -k128 forms
  bool fused_dq = false;
  int rows() const { return warps * rows_per_warp; }
  bool operator==(const FlashTiling&) const = default;
};
inline constexpr FlashTiling kFlashTiling4x16{4, 16};
inline constexpr FlashTiling kFlashTiling8x16{8, 16};
inline constexpr FlashTiling kFlashTiling4x32{4, 32};
inline constexpr FlashTiling kFlashTilingWgmma64{4, 16, true};
inline constexpr FlashTiling kFlashTilingWgmma128{8, 16, true};
inline constexpr FlashTiling kFlashTilingWgmma64NMajor{4, 16, true, true};
inline constexpr FlashTiling kFlashTilingWgmma128NMajor{8, 16, true, true};
inline constexpr FlashTiling kFlashTilingWgmma64Pipe{4, 16, true, false, true};
inline constexpr FlashTiling kFlashTilingWgmma128Pipe{8, 16, true, false, true};
inline constexpr FlashTiling kFlashTilingWgmma64NMajorPipe{4, 16, true, true, true};
inline constexpr FlashTiling kFlashTilingWgmma128NMajorPipe{8, 16, true, true, true};
inline constexpr FlashTiling kFlashTilingWgmma64PipeK128{4, 16, true, false, true, 128};
inline constexpr FlashTiling kFlashTilingWgmma128PipeK128{8, 16, true, false, true, 128};
inline constexpr FlashTiling kFlashTilingWgmma64NMajorPipeK128{4, 16, true, true, true, 128};
inline constexpr FlashTiling kFlashTilingWgmma128NMajorPipeK128{8, 16, true, true, true, 128};
inline constexpr FlashTiling kFlashTilingFusedDq{4, 16, false, false, false, 64, true};
// "4x16", "wgmma-128", "wgmma-64-nmajor", "wgmma-128-nmajor-pipe",
// "wgmma-64-pipe-k128", "fused-dq"
std::string FlashTilingName(FlashTiling t);

// The default tilings on compute capability 9.0 (H100/H200), where they
// cover the head size (a wgmma backward or a 128-key or 4x32 forward needs
// head size <= 64); 4x16 elsewhere and otherwise. 8x16 for both: fastest of
// the 15 forward and 10 backward tilings gpu_session.sh's tiling stage timed
// on an H100 (GPT-2 124M shapes, B=16: forward 0.141 ms against 0.145 for
// 4x32 and 0.152 for 4x16; backward 0.501 against 0.506 for 4x16, every
// wgmma backward 0.58 ms or more), and +0.8% on the whole 124M step at B=32.
inline constexpr FlashTiling kHopperForwardDefault = kFlashTiling8x16;
inline constexpr FlashTiling kHopperBackwardDefault = kFlashTiling8x16;
static_assert(kHopperForwardDefault.key_tile == 64 ||
                  (kHopperForwardDefault.wgmma && kHopperForwardDefault.pipelined),
              "128-key tiles exist in the pipelined wgmma forward only");
static_assert(kHopperBackwardDefault.key_tile == 64 && kHopperBackwardDefault.rows_per_warp == 16,
              "the backward takes 64-key tiles and 16 rows a warp (no -k128, no 4x32)");

// The tilings the attention dispatch uses for head size `head_size`: the
// forward's and the backward's. The defaults above unless
// WEFT_FLASH_FWD_TILING / WEFT_FLASH_BWD_TILING name another ("8x16",
// "wgmma-128"), read at every launch so benchmarks and tests can compare
// them in one process; a value that names no tiling, or a wgmma tiling on a
// GPU other than compute capability 9.0, is an error, never ignored (and a
// named tiling the head size rules out fails at launch).
absl::StatusOr<FlashTiling> FlashForwardTiling(int64_t head_size);
absl::StatusOr<FlashTiling> FlashBackwardTiling(int64_t head_size);
// The default those use: `hopper_default` (kHopperForwardDefault or, with
// `backward`, kHopperBackwardDefault) on compute capability 9.0 where it
// covers `head_size`, else 4x16.
absl::StatusOr<FlashTiling> FlashDefaultTiling(FlashTiling hopper_default, bool backward,
                                               int64_t head_size);

// bf16 flash kernels (tensor cores); HS in {32, 64, 128} and 16-byte
// aligned base pointers (attention.cc checks with FlashAttentionApplies).
// Forward tilings: 4x16, 8x16, 4x32 at HS <= 64, and the wgmma ones (the
// caller checks for compute capability 9.0).
absl::Status LaunchFlashForward(void* out, float* lse, const void* qkv, const AttentionDims& d,
                                FlashTiling tiling, cudaStream_t stream);
// The wgmma forward (sm_90a): 1 or 2 warpgroups of 64 query rows a block;
// n_major: V read N-major (FlashTiling::n_major); pipelined: products
// behind the softmax (FlashTiling::pipelined); key_tile: 64, or 128
// (pipelined, head size <= 64).
absl::Status LaunchFlashForwardWgmma(void* out, float* lse, const void* qkv,
                                     const AttentionDims& d, int warpgroups, bool n_major,
                                     bool pipelined, int key_tile, cudaStream_t stream);
// dsum (B, NH, T) holds rowsum(dout * out) from LaunchAttentionRowDot.
// `bwd_tiling` 4x16 or 8x16 splits the dQ kernel's queries (the mma.sync
// dK/dV kernel always owns 64 keys over 4 warps); wgmma-64 / wgmma-128 run
// both kernels on wgmma with 1 / 2 warpgroups a block (HS 32 or 64; the
// caller checks compute capability 9.0).
// `fused-dq` (HS 32 or 64) runs the dK/dV kernel alone: each step also
// multiplies its dS tile by K and adds the product into an f32 dQ
// accumulator in `workspace`, the key tiles of a query tile in ascending
// order (a semaphore per query tile), so the sum is the same every run;
// the last key tile writes dQ. `workspace` holds
// FlashBackwardWorkspaceFloats floats (unused, may be null, otherwise).
absl::Status LaunchFlashBackward(void* dqkv, const void* dout, const void* qkv, const float* lse,
                                 const float* dsum, float* workspace, const AttentionDims& d,
                                 FlashTiling bwd_tiling, cudaStream_t stream);
// Floats of device workspace LaunchFlashBackward needs for `bwd_tiling`
// (fused-dq: the dQ accumulator and the semaphores; 0 for the others).
int64_t FlashBackwardWorkspaceFloats(const AttentionDims& d, FlashTiling bwd_tiling);
// The wgmma backward (sm_90a): dK/dV blocks of `warpgroups` (1 or 2)
// warpgroups of 64 keys, dQ blocks of as many warpgroups of 64 queries;
// n_major: dO, Q and K read N-major (FlashTiling::n_major); pipelined:
// each step's products overlap the previous step's (FlashTiling::pipelined).
absl::Status LaunchFlashBackwardWgmma(void* dqkv, const void* dout, const void* qkv,
                                      const float* lse, const float* dsum,
                                      const AttentionDims& d, int warpgroups, bool n_major,
                                      bool pipelined, cudaStream_t stream);

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
