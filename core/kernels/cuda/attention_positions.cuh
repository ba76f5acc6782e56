// Global token positions of a rank's local rows (TokenChunks) on the
// device, for the blockwise (ring) attention kernels: causal masking is by
// position, key position <= query position.
#ifndef WEFT_CORE_KERNELS_CUDA_ATTENTION_POSITIONS_CUH_
#define WEFT_CORE_KERNELS_CUDA_ATTENTION_POSITIONS_CUH_

#include <cstdint>

#include "core/kernels/token_chunks.h"

namespace weft::cuda {

// TokenChunks by value in a kernel's parameters.
struct Chunks {
  int64_t len;
  int count;
  int64_t off[TokenChunks::kMaxChunks];
};

inline Chunks ToChunks(const TokenChunks& c) {
  Chunks d{c.chunk_len, c.count, {}};
  for (int i = 0; i < TokenChunks::kMaxChunks; ++i) d.off[i] = c.offsets[i];
  return d;
}

__device__ __forceinline__ int64_t PositionOf(const Chunks& c, int64_t r) {
  return c.off[r / c.len] + r % c.len;
}

// The smallest and largest position of local rows [r0, r1) (r1 > r0, within
// the chunks): the rows of one chunk are consecutive positions, so each
// chunk's part of the range contributes its two ends.
__device__ __forceinline__ void PositionRange(const Chunks& c, int64_t r0, int64_t r1,
                                              int64_t& lo, int64_t& hi) {
  lo = INT64_MAX;
  hi = INT64_MIN;
  for (int k = 0; k < c.count; ++k) {
    const int64_t begin = k * c.len;
    const int64_t a = r0 > begin ? r0 : begin;
    const int64_t e = r1 < begin + c.len ? r1 : begin + c.len;
    if (a >= e) continue;
    const int64_t first = c.off[k] + (a - begin), last = c.off[k] + (e - 1 - begin);
    lo = first < lo ? first : lo;
    hi = last > hi ? last : hi;
  }
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ATTENTION_POSITIONS_CUH_
