// Device helpers of the blockwise (ring) attention kernels, the
// warp-per-row ones (attention_block.cu) and the tensor-core ones
// (attention_flash_block_*.cu): global token positions of a rank's local
// rows (causal masking is by position, key position <= query position) and
// the log-sum-exp merge of a block's result into the running one.
#ifndef WEFT_CORE_KERNELS_CUDA_ATTENTION_RING_CUH_
#define WEFT_CORE_KERNELS_CUDA_ATTENTION_RING_CUH_

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

// Weights of the running part (lse la) and the block's part (lse lb) in
// the merged softmax, and the merged lse; -inf marks "no key seen yet".
__device__ __forceinline__ void MergeWeights(float la, float lb, float& wa, float& wb,
                                             float& merged) {
  wa = wb = 0.0f;
  merged = -INFINITY;
  if (lb == -INFINITY) {
    wa = la == -INFINITY ? 0.0f : 1.0f;
    merged = la;
  } else if (la == -INFINITY) {
    merged = lb;
    wb = 1.0f;
  } else {
    const float hi = fmaxf(la, lb), lo = fminf(la, lb);
    merged = hi + log1pf(expf(lo - hi));
    wa = expf(la - merged);
    wb = expf(lb - merged);
  }
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_ATTENTION_RING_CUH_
