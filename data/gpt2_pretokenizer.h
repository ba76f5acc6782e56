// GPT-2's pre-tokenization, exactly: the chunks of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// over the text's code points (unicode_classes.h), the rule OpenAI's
// encoder.py and Hugging Face's ByteLevel pre-tokenizer apply before BPE, so
// that a GPT-2 vocabulary encodes to the ids they give. Invalid UTF-8 bytes
// count as symbols (neither letters, numbers nor space). Chunks are
// contiguous and cover the text.
#ifndef WEFT_DATA_GPT2_PRETOKENIZER_H_
#define WEFT_DATA_GPT2_PRETOKENIZER_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace weft::data {

// End (exclusive) of the chunk that starts at `pos` (< text.size()).
size_t Gpt2ChunkEnd(absl::string_view text, size_t pos);

// Llama 3's rule (tiktoken's cl100k pattern, as its tokenizer.json splits):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t Llama3ChunkEnd(absl::string_view text, size_t pos);

template <typename F>
void ForEachGpt2Chunk(absl::string_view text, F&& f) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = Gpt2ChunkEnd(text, pos);
    f(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace weft::data

#endif  // WEFT_DATA_GPT2_PRETOKENIZER_H_
