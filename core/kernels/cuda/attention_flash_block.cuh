// Shared pieces of the tensor-core blockwise (ring) attention kernels
// (attention_flash_block_fwd.cu, attention_flash_block_bwd.cu): the
// operands' layout and the position bounds of a tile, by which a (query
// tile, key tile) pair is skipped (every key after every query), taken
// whole (every key at or before every query) or masked element by element.
#ifndef WEFT_CORE_KERNELS_CUDA_ATTENTION_FLASH_BLOCK_CUH_
#define WEFT_CORE_KERNELS_CUDA_ATTENTION_FLASH_BLOCK_CUH_

#include <cstdint>

#include "core/kernels/cuda/attention.h"
#include "core/kernels/cuda/attention_flash_tiles.cuh"
#include "core/kernels/cuda/attention_ring.cuh"

namespace weft::cuda {

constexpr int kRingTile = kFlashTile;  // rows of a query or key tile
constexpr int kRingWarps = 4;  // each owns 16 rows of the block's tile
constexpr int kRingThreads = kRingWarps * 32;

struct BlockOperands {
  int tq, tk, nh;
  int64_t q_ld, kv_ld;  // row strides (elements) of q (and dq), kv (and dkv)
  int k_col, v_col;     // where k and v start in a kv row
  Chunks qc, kc;
};

inline BlockOperands OperandsOf(const BlockAttentionArgs& a) {
  const int c = static_cast<int>(a.nh * a.hs);
  const int k_col = a.kv_width == 3 * c ? c : 0;
  return {static_cast<int>(a.tq), static_cast<int>(a.tk), static_cast<int>(a.nh),
          a.q_width,              a.kv_width,             k_col,
          k_col + c,              ToChunks(a.q_chunks),   ToChunks(a.kv_chunks)};
}

// Position bounds of local rows [r0, min(r0 + rows, t)) of chunks c.
__device__ __forceinline__ void TileRange(const Chunks& c, int r0, int rows, int t, int64_t& lo,
                                          int64_t& hi) {
  PositionRange(c, r0, r0 + rows < t ? r0 + rows : t, lo, hi);
}

// The first key tile at or after kt holding a key that a query at or
// before position q_hi can see; ntiles when none is left.
__device__ __forceinline__ int NextKeyTile(const BlockOperands& p, int kt, int ntiles,
                                           int64_t q_hi) {
  for (; kt < ntiles; ++kt) {
    int64_t lo, hi;
    TileRange(p.kc, kt * kRingTile, kRingTile, p.tk, lo, hi);
    if (lo <= q_hi) return kt;
  }
  return ntiles;
}

// The first query step (of `rows` rows) starting at or after q0 holding a
// query that can see a key at position k_lo or later; tq when none is left.
__device__ __forceinline__ int NextQueryStep(const BlockOperands& p, int q0, int rows,
                                             int64_t k_lo) {
  for (; q0 < p.tq; q0 += rows) {
    int64_t lo, hi;
    TileRange(p.qc, q0, rows, p.tq, lo, hi);
    if (hi >= k_lo) return q0;
  }
  return p.tq;
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ATTENTION_FLASH_BLOCK_CUH_
