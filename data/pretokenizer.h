// Pre-tokenization for byte-level BPE: cuts text into chunks that merges never
// cross, so " the" is learned once instead of once per neighbour. Chunks are
// contiguous and cover the text, so concatenating them gives the bytes back
// exactly, whatever the input (invalid UTF-8 and NUL bytes included).
//
// Rules, applied at the start of each chunk:
//   - A run of letters (ASCII letters and every byte >= 0x80, so UTF-8
//     characters stay whole), of digits, or of other symbols is one chunk.
//   - A single ' ' directly before such a run belongs to it (" the").
//   - Other whitespace runs are chunks of their own; when the run ends in ' '
//     and a run follows, that last ' ' goes to the run instead.
//   - No chunk is longer than kMaxChunkBytes, which bounds the cost of
//     encoding one chunk on pathological input (megabytes without spaces).
//
// A position p where text[p-1] is not whitespace and text[p] is whitespace is
// always a chunk boundary, whatever came before: SafeSplitPoint uses that to
// cut long inputs into blocks that encode exactly like the whole.
#ifndef WEFT_DATA_PRETOKENIZER_H_
#define WEFT_DATA_PRETOKENIZER_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace weft::data {

inline constexpr size_t kMaxChunkBytes = 64;

// End (exclusive) of the chunk that starts at `pos` (< text.size()).
size_t ChunkEnd(absl::string_view text, size_t pos);

// Calls f(chunk) for each chunk of `text` in order.
template <typename F>
void ForEachChunk(absl::string_view text, F&& f) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = ChunkEnd(text, pos);
    f(text.substr(pos, end - pos));
    pos = end;
  }
}

// The first position >= `at_least` where a new chunk starts regardless of the
// text before it, or text.size(). Both tokenizers encode text[0, p) and
// text[p, end) exactly as they encode the whole.
size_t SafeSplitPoint(absl::string_view text, size_t at_least);

}  // namespace weft::data

#endif  // WEFT_DATA_PRETOKENIZER_H_
