// Gpt2Tokenizer: a GPT-2-style byte-level BPE vocabulary as OpenAI and
// Hugging Face ship it (GPT-2's vocab.json + merges.txt, or a tokenizer.json
// of the same scheme: BPE model, ByteLevel pre-tokenizer and decoder), giving
// the same ids they give: text is cut by GPT-2's rule (gpt2_pretokenizer.h),
// each chunk's bytes start as the vocabulary's byte tokens (bytes named by
// GPT-2's printable byte-to-unicode table) and merges apply lowest rank
// first. Unlike weft's own BpeTokenizer, ids follow the vocabulary's order.
// The end-of-text token is the added token "<|endoftext|>" when present;
// that text in the input encodes to it, as Hugging Face splits its special
// tokens out (the data pipeline also joins documents with eot_id()).
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
#include "data/tokenizer.h"

namespace weft::data {

class Gpt2Tokenizer : public Tokenizer {
 public:
  static constexpr char kKind[] = "gpt2";

  // vocab.json's text and merges.txt's (`name`s for messages).
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> FromVocabAndMerges(
      absl::string_view vocab_json, absl::string_view merges_txt, absl::string_view name);
  // A Hugging Face tokenizer.json of the GPT-2 scheme; another scheme (a
  // normalizer, another pre-tokenizer such as Llama 3's split regex, byte
  // fallback, a prefix space) is refused, naming it.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> FromTokenizerJson(
      absl::string_view json, absl::string_view name);
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
      int32_t eot, absl::string_view name);
  Gpt2Tokenizer() = default;
  void EncodeChunk(absl::string_view chunk, std::vector<int32_t>* ids) const;

  std::vector<std::string> tokens_;
  std::vector<std::pair<int32_t, int32_t>> merges_;
  // (left << 32 | right) -> (rank, merged id)
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> rank_;
  std::array<int32_t, 256> byte_id_{};
  int32_t eot_ = -1;
};

}  // namespace weft::data

#endif  // WEFT_DATA_GPT2_TOKENIZER_H_
