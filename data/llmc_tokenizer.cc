#include "data/llmc_tokenizer.h"

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "data/hex_text.h"

namespace weft::data {
namespace {

constexpr char kHeader[] = "weft-tokenizer llmc v1";

int32_t Int32At(absl::string_view s, size_t i) {
  uint32_t v = 0;
  for (int b = 3; b >= 0; --b) v = (v << 8) | static_cast<uint8_t>(s[4 * i + b]);
  return static_cast<int32_t>(v);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlmcTokenizer>> LlmcTokenizer::FromLlmcFile(
    absl::string_view contents, absl::string_view name) {
  const auto bad = [&](absl::string_view what) {
    return InvalidArgument(absl::StrCat("llm.c tokenizer file '", name, "': ", what),
                           "llm.c's gpt2_tokenizer.bin (a 1 KiB header, then each token as a "
                           "length byte and its bytes)");
  };
  if (contents.size() < 1024) return bad(absl::StrCat(contents.size(), " bytes, under its header"));
  if (Int32At(contents, 0) != kLlmcTokenizerMagic) return bad("not its magic number");
  const int32_t version = Int32At(contents, 1), vocab = Int32At(contents, 2);
  if (version != 1 && version != 2) return bad(absl::StrCat("version ", version, " (1 or 2)"));
  if (vocab < 1 || vocab > (1 << 22)) return bad(absl::StrCat("vocabulary size ", vocab));
  // Version 1 predates the field: GPT-2's end-of-text is its last token.
  const int32_t eot = version == 2 ? Int32At(contents, 3) : vocab - 1;
  if (eot < 0 || eot >= vocab) return bad(absl::StrCat("end-of-text id ", eot));
  std::vector<std::string> tokens(vocab);
  size_t at = 1024;
  for (int32_t i = 0; i < vocab; ++i) {
    if (at >= contents.size()) return bad(absl::StrCat("ends at token ", i, " of ", vocab));
    const size_t len = static_cast<uint8_t>(contents[at++]);
    if (at + len > contents.size()) return bad(absl::StrCat("token ", i, " runs past the end"));
    tokens[i] = std::string(contents.substr(at, len));
    at += len;
  }
  if (at != contents.size()) return bad(absl::StrCat(contents.size() - at, " bytes after the last token"));
  return std::unique_ptr<LlmcTokenizer>(new LlmcTokenizer(std::move(tokens), eot));
}

absl::StatusOr<std::unique_ptr<LlmcTokenizer>> LlmcTokenizer::Parse(absl::string_view contents,
                                                                    absl::string_view name) {
  const std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n', absl::SkipEmpty());
  const auto bad = [&](absl::string_view what) {
    return InvalidArgument(absl::StrCat("llm.c tokenizer (weft's form) '", name, "': ", what),
                           "the format Serialize writes");
  };
  int64_t v = 0;
  const std::vector<absl::string_view> count =
      absl::StrSplit(lines.size() > 1 ? lines[1] : "", ' ');
  if (lines.empty() || lines[0] != kHeader || count.size() != 2 || count[1] != "tokens" ||
      !absl::SimpleAtoi(count[0], &v) || v < 1 || static_cast<int64_t>(lines.size()) != v + 3) {
    return bad("not 'weft-tokenizer llmc v1', '<V> tokens', V token lines, 'eot <id>'");
  }
  std::vector<std::string> tokens(v);
  for (int64_t i = 0; i < v; ++i) {
    const absl::string_view hex = lines[2 + i];
    if (hex != "-" && !FromHex(hex, &tokens[i])) return bad(absl::StrCat("token line ", i));
  }
  int32_t eot = -1;
  const std::vector<absl::string_view> e = absl::StrSplit(lines.back(), ' ');
  if (e.size() != 2 || e[0] != "eot" || !absl::SimpleAtoi(e[1], &eot) || eot < 0 || eot >= v) {
    return bad("no 'eot <id>' line");
  }
  return std::unique_ptr<LlmcTokenizer>(new LlmcTokenizer(std::move(tokens), eot));
}

absl::Status LlmcTokenizer::EncodeAppend(absl::string_view text, std::vector<int32_t>*) const {
  if (text.empty()) return absl::OkStatus();
  return FailedPrecondition(
      "encoding text with llm.c's tokenizer file",
      "a tokenizer with merges: llm.c's gpt2_tokenizer.bin holds each token's bytes only, so it "
      "decodes but cannot encode",
      "pass GPT-2's vocab.json (with merges.txt beside it) or tokenizer.json for the same ids, or "
      "sample with an empty prompt");
}

absl::StatusOr<std::string> LlmcTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return InvalidArgument(absl::StrCat("token id ", ids[i], " at position ", i),
                             absl::StrCat("ids in [0, ", vocab_size(), ")"));
    }
    out.append(tokens_[ids[i]]);
  }
  return out;
}

std::string LlmcTokenizer::Serialize() const {
  std::string out = absl::StrCat(kHeader, "\n", tokens_.size(), " tokens\n");
  for (const std::string& t : tokens_) absl::StrAppend(&out, t.empty() ? "-" : ToHex(t), "\n");
  absl::StrAppend(&out, "eot ", eot_, "\n");
  return out;
}

}  // namespace weft::data
