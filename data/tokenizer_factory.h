// Making tokenizers from a spec string or a file, whatever their kind.
//
//   "char"        CharTokenizer over the documents' characters
//   "bpe"         BpeTokenizer trained to kDefaultBpeVocab ids
//   "bpe:<N>"     BpeTokenizer trained to N ids (256 bytes + merges + end-of-text)
#ifndef WEFT_DATA_TOKENIZER_FACTORY_H_
#define WEFT_DATA_TOKENIZER_FACTORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/tokenizer.h"

namespace weft::data {

inline constexpr int64_t kDefaultBpeVocab = 4096;

// Reads a file written by Tokenizer::Save (the first line picks the kind),
// a Hugging Face tokenizer.json of GPT-2's scheme, GPT-2's vocab.json (with
// the merges.txt beside it), or a directory holding either (gpt2_tokenizer.h);
// "hf:PATH" says the last kinds explicitly (prepare_data --tokenizer=hf:DIR).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);
absl::StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizer(absl::string_view contents,
                                                           absl::string_view name);

// Builds (char) or trains (bpe) a tokenizer from `documents` per `spec`.
// `progress(done, total)` reports BPE merges; may be empty.
absl::StatusOr<std::unique_ptr<Tokenizer>> BuildTokenizer(
    absl::string_view spec, absl::Span<const absl::string_view> documents,
    const std::function<void(int64_t, int64_t)>& progress = {});

// True for the specs BuildTokenizer takes (as opposed to a file path).
bool IsTokenizerSpec(absl::string_view spec);

}  // namespace weft::data

#endif  // WEFT_DATA_TOKENIZER_FACTORY_H_
