// TokenChunks: where a rank's tokens sit in the whole sequence when the
// sequence is split over ranks (context parallelism). The tokens form
// `count` equal chunks of `chunk_len`; chunk i starts at global position
// offsets[i]. Attention masks causally by these positions and position
// embeddings read them. Plain data, so it can travel to a CUDA kernel.
#ifndef WEFT_CORE_KERNELS_TOKEN_CHUNKS_H_
#define WEFT_CORE_KERNELS_TOKEN_CHUNKS_H_

#include <cstdint>

namespace weft {

struct TokenChunks {
  static constexpr int kMaxChunks = 4;
  int64_t chunk_len = 0;
  int count = 0;
  int64_t offsets[kMaxChunks] = {};
  // The whole sequence's length (0: size(), the chunks are all of it), for
  // what indexes the global (B, T, ...) tensor: dropout masks.
  int64_t seq_len = 0;

  // One chunk of `len` tokens starting at `offset`.
  static TokenChunks Contiguous(int64_t len, int64_t offset = 0) {
    TokenChunks c;
    c.chunk_len = len;
    c.count = 1;
    c.offsets[0] = offset;
    return c;
  }
  int64_t size() const { return chunk_len * count; }
  // Global position of local token r.
  int64_t Position(int64_t r) const { return offsets[r / chunk_len] + r % chunk_len; }
  // True when local token r is global token r (an unsplit sequence).
  bool IsIdentity() const {
    for (int i = 0; i < count; ++i) {
      if (offsets[i] != i * chunk_len) return false;
    }
    return true;
  }
};

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_TOKEN_CHUNKS_H_
