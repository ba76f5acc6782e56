// Gpt2Tokenizer: a byte-level BPE vocabulary as OpenAI and Hugging Face ship
// it (GPT-2's vocab.json + merges.txt, or a tokenizer.json of a BPE model
// with the ByteLevel decoder and either GPT-2's ByteLevel pre-tokenizer or
// Llama 3's split regex before it), giving the same ids they give: special
// tokens are split out of the text first, the rest is cut by the scheme's
// rule (gpt2_pretokenizer.h),
// each chunk's bytes start as the vocabulary's byte tokens (bytes named by
// GPT-2's printable byte-to-unicode table) and merges apply lowest rank
// first. Unlike weft's own BpeTokenizer, ids follow the vocabulary's order.
// The end-of-text token is "<|endoftext|>" (GPT-2) or "<|end_of_text|>"
// (Llama 3) when the vocabulary has it; the data pipeline joins documents
// with it. No BOS is added (Llama 3's post-processor adds one; weft's
// prompts and data do not).
//
// Serialize() writes weft's form of it ("weft-tokenizer gpt2 v1"), which
// checkpoints keep: the token bytes in id order, the merges as id pairs,
// the end-of-text id.
#ifndef WEFT_DATA_GPT2_TOKENIZER_H_
#define WEFT_DATA_GPT2_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/base/json.h"
#include "data/tokenizer.h"

namespace weft::data {

class Gpt2Tokenizer : public Tokenizer {
 public:
  static constexpr char kKind[] = "gpt2";

  enum class Split { kGpt2, kLlama3 };
  struct Scheme {
    Split split = Split::kGpt2;
    // A chunk that is one token is that token, merges or not (Llama 3).
    bool ignore_merges = false;
    // Special tokens' text and ids, split out of the text before BPE.
    std::vector<std::pair<std::string, int32_t>> specials;
  };

  // vocab.json's text and merges.txt's (`name`s for messages).
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> FromVocabAndMerges(
      absl::string_view vocab_json, absl::string_view merges_txt, absl::string_view name);
  // A Hugging Face tokenizer.json of the GPT-2 scheme; another scheme (a
  // normalizer, another pre-tokenizer such as Llama 3's split regex, byte
  // fallback, a prefix space) is refused, naming it.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> FromTokenizerJson(
      absl::string_view json, absl::string_view name);
  // The same, already parsed.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> FromTokenizerJson(const JsonValue& json,
                                                                          absl::string_view name);
  // Serialize()'s format.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Parse(absl::string_view contents,
                                                              absl::string_view name);

  absl::string_view kind() const override { return kKind; }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  int32_t eot_id() const override { return eot_; }
  absl::Status EncodeAppend(absl::string_view text, std::vector<int32_t>* ids) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  std::string Serialize() const override;
  // The vocabulary as a Hugging Face tokenizer.json (GPT-2's scheme), which
  // FromTokenizerJson and HF's tokenizers read back to the same ids.
  std::string ToTokenizerJson() const;

 private:
  // tokens: each id's bytes; merges: (left, right) ids in rank order, each
  // making the token of their concatenated bytes.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Build(
      std::vector<std::string> tokens, const std::vector<std::pair<int32_t, int32_t>>& merges,
      int32_t eot, Scheme scheme, absl::string_view name);
  // Ordinary text (no special tokens) to ids.
  void EncodeText(absl::string_view text, std::vector<int32_t>* ids) const;
  Gpt2Tokenizer() = default;
  void EncodeChunk(absl::string_view chunk, std::vector<int32_t>* ids) const;

  std::vector<std::string> tokens_;
  std::vector<std::pair<int32_t, int32_t>> merges_;
  // (left << 32 | right) -> (rank, merged id)
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> rank_;
  std::array<int32_t, 256> byte_id_{};
  absl::flat_hash_map<std::string, int32_t> by_bytes_;  // ordinary tokens
  int32_t eot_ = -1;
  Scheme scheme_;
};

}  // namespace weft::data

#endif  // WEFT_DATA_GPT2_TOKENIZER_H_
