// CharTokenizer: one id per character, with the vocabulary taken from a
// corpus (the sorted set of its characters, as in char-level GPT examples).
//
// A character is a UTF-8 code point; a byte that is not part of valid UTF-8
// is a character of its own, so any corpus builds a vocabulary and every
// text made of its characters round-trips exactly. Text with a character the
// corpus lacked fails to encode with its position (there is no <unk>: a
// silent substitution would train on data the user never wrote).
//
// File format (text): "weft-tokenizer char v1", then the number of
// characters, then one unit per line as a decimal number: the code point,
// or 0x110000 + byte for a raw byte. Ids follow line order.
#ifndef WEFT_DATA_CHAR_TOKENIZER_H_
#define WEFT_DATA_CHAR_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace weft::data {

class CharTokenizer : public Tokenizer {
 public:
  static constexpr char kKind[] = "char";
  // Units at or above this are raw bytes (unit - kRawByteBase).
  static constexpr uint32_t kRawByteBase = 0x110000;

  // The vocabulary of the documents' characters. An empty corpus is an error.
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> Build(
      absl::Span<const absl::string_view> documents);
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> Build(absl::string_view corpus) {
    return Build(absl::MakeConstSpan(&corpus, 1));
  }
  // Reads Serialize()'s output; `name` is used in errors.
  static absl::StatusOr<std::unique_ptr<CharTokenizer>> Parse(absl::string_view contents,
                                                              absl::string_view name);

  absl::string_view kind() const override { return kKind; }
  int64_t vocab_size() const override { return static_cast<int64_t>(units_.size()); }
  absl::Status EncodeAppend(absl::string_view text, std::vector<int32_t>* ids) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  std::string Serialize() const override;

  // The units (code points or kRawByteBase + byte) in id order.
  const std::vector<uint32_t>& units() const { return units_; }

 private:
  explicit CharTokenizer(std::vector<uint32_t> units);

  std::vector<uint32_t> units_;                     // id -> unit, ascending
  std::array<int32_t, 128> ascii_;                  // ASCII unit -> id, -1 if absent
  absl::flat_hash_map<uint32_t, int32_t> others_;   // every other unit -> id
};

}  // namespace weft::data

#endif  // WEFT_DATA_CHAR_TOKENIZER_H_
