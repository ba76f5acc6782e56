// Index arithmetic of a vocabulary shard (tensor parallelism), shared by the
// CPU and CUDA kernels (constexpr: device code calls it too). A shard holds
// global columns (classes, token-table rows) [begin, begin + cols); those
// below `vocab` are real, the rest is padding that no loss ever sees.
#ifndef WEFT_CORE_KERNELS_VOCAB_SHARD_H_
#define WEFT_CORE_KERNELS_VOCAB_SHARD_H_

#include <cstdint>

namespace weft {

// Local columns [0, real) are real classes: clamp(vocab - begin, 0, cols).
constexpr int64_t VocabRealColumns(int64_t begin, int64_t cols, int64_t vocab) {
  const int64_t real = vocab - begin;
  return real < 0 ? 0 : (real > cols ? cols : real);
}

// The local column of global id y, or -1 when this shard does not hold it as
// a real column (another shard's id, padding, or an id outside [0, vocab)).
constexpr int64_t VocabLocalColumn(int64_t y, int64_t begin, int64_t real) {
  const int64_t col = y - begin;
  return y >= 0 && col >= 0 && col < real ? col : -1;
}

// The local row of token id t in a table shard of `rows` rows, padding rows
// included (their embeddings exist and train like any other), or -1.
constexpr int64_t VocabLocalRow(int64_t t, int64_t begin, int64_t rows) {
  const int64_t row = t - begin;
  return row >= 0 && row < rows ? row : -1;
}

}  // namespace weft

#endif  // WEFT_CORE_KERNELS_VOCAB_SHARD_H_
