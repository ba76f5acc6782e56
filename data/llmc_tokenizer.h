// LlmcTokenizer: llm.c's gpt2_tokenizer.bin, for decoding. The file holds
// each token's bytes (GPT-2's 50257) and the end-of-text id, but no merges,
// so it cannot encode text: Encode of non-empty text is an error that names
// the files that can (GPT-2's vocab.json + merges.txt, or tokenizer.json).
// Sampling from an llm.c model with an empty prompt (which starts from the
// end-of-text token) needs no more.
//
// llm.c's format: 256 little-endian int32 (magic 20240328, version 1 or 2,
// vocab size, and in version 2 the end-of-text id), then per token a uint8
// length and that many bytes. weft's own form: "weft-tokenizer llmc v1",
// "<V> tokens", V hex lines ("-" for an empty one), "eot <id>".
#ifndef WEFT_DATA_LLMC_TOKENIZER_H_
#define WEFT_DATA_LLMC_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace weft::data {

inline constexpr int32_t kLlmcTokenizerMagic = 20240328;

class LlmcTokenizer : public Tokenizer {
 public:
  static constexpr char kKind[] = "llmc";

  // The contents of an llm.c tokenizer file.
  static absl::StatusOr<std::unique_ptr<LlmcTokenizer>> FromLlmcFile(absl::string_view contents,
                                                                      absl::string_view name);
  // Serialize()'s format.
  static absl::StatusOr<std::unique_ptr<LlmcTokenizer>> Parse(absl::string_view contents,
                                                              absl::string_view name);

  absl::string_view kind() const override { return kKind; }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  int32_t eot_id() const override { return eot_; }
  absl::Status EncodeAppend(absl::string_view text, std::vector<int32_t>* ids) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  std::string Serialize() const override;

 private:
  LlmcTokenizer(std::vector<std::string> tokens, int32_t eot)
      : tokens_(std::move(tokens)), eot_(eot) {}

  std::vector<std::string> tokens_;
  int32_t eot_;
};

}  // namespace weft::data

#endif  // WEFT_DATA_LLMC_TOKENIZER_H_
