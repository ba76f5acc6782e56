// Tokenizer: the interface shared by the char-level and byte-level BPE
// tokenizers. Tokenizer files are text whose first line names the kind
// ("weft-tokenizer char v1", "weft-tokenizer bpe v1"), so LoadTokenizer
// (load_tokenizer.h) can open either without being told which.
//
//   auto tok = LoadTokenizer("out/tokenizer.txt").value();
//   std::vector<int32_t> ids = tok->Encode("To be, or not").value();
//   std::string text = tok->Decode(ids).value();  // "To be, or not"
//
// Implementations are immutable after construction, so Encode and Decode
// may run on several threads at once.
#ifndef WEFT_DATA_TOKENIZER_H_
#define WEFT_DATA_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace weft::data {

inline constexpr char kTokenizerFileMagic[] = "weft-tokenizer";

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual absl::string_view kind() const = 0;  // "char" or "bpe"
  virtual int64_t vocab_size() const = 0;
  // The end-of-text id that separates documents, or -1 when there is none.
  virtual int32_t eot_id() const { return -1; }

  // Appends the ids of `text` to `ids`. Fails (leaving `ids` unspecified) on
  // text the vocabulary cannot represent.
  virtual absl::Status EncodeAppend(absl::string_view text, std::vector<int32_t>* ids) const = 0;
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const = 0;
  // The file contents Save writes; ParseTokenizer reads them back.
  virtual std::string Serialize() const = 0;

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const;
  // Writes Serialize() to `path` atomically.
  absl::Status Save(const std::string& path) const;
};

}  // namespace weft::data

#endif  // WEFT_DATA_TOKENIZER_H_
