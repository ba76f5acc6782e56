#include "data/tokenizer_factory.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/json.h"
#include "core/base/status_macros.h"
#include "data/bpe_tokenizer.h"
#include "data/bpe_trainer.h"
#include "data/char_tokenizer.h"
#include "data/gpt2_tokenizer.h"
#include "data/llmc_tokenizer.h"
#include "data/file_util.h"

namespace weft::data {

absl::StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizer(absl::string_view contents,
                                                          absl::string_view name) {
  const absl::string_view first_line = contents.substr(0, contents.find('\n'));
  if (first_line == absl::StrCat(kTokenizerFileMagic, " ", CharTokenizer::kKind, " v1")) {
    WEFT_ASSIGN_OR_RETURN(auto tok, CharTokenizer::Parse(contents, name));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (first_line == absl::StrCat(kTokenizerFileMagic, " ", BpeTokenizer::kKind, " v1")) {
    WEFT_ASSIGN_OR_RETURN(auto tok, BpeTokenizer::Parse(contents, name));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (first_line == absl::StrCat(kTokenizerFileMagic, " ", LlmcTokenizer::kKind, " v1")) {
    WEFT_ASSIGN_OR_RETURN(auto tok, LlmcTokenizer::Parse(contents, name));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  // llm.c's gpt2_tokenizer.bin (magic 20240328 as a little-endian int32): decoding only.
  if (contents.size() >= 4 && static_cast<unsigned char>(contents[0]) == 0xc8 &&
      static_cast<unsigned char>(contents[1]) == 0xd7 && contents[2] == 0x34 && contents[3] == 0x01) {
    WEFT_ASSIGN_OR_RETURN(auto tok, LlmcTokenizer::FromLlmcFile(contents, name));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (first_line == absl::StrCat(kTokenizerFileMagic, " ", Gpt2Tokenizer::kKind, " v1")) {
    WEFT_ASSIGN_OR_RETURN(auto tok, Gpt2Tokenizer::Parse(contents, name));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  // A Hugging Face tokenizer.json (an object with a "model").
  // (A JSON object with a "model" object; a GPT-2 vocab.json maps token
  // names to ids, and may hold one named model.) Parsed once.
  if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(contents), "{")) {
    if (absl::StatusOr<JsonValue> j = ParseJson(contents); j.ok()) {
      const JsonValue* model = j->Find("model");
      if (model != nullptr && model->is_object()) {
        WEFT_ASSIGN_OR_RETURN(auto tok, Gpt2Tokenizer::FromTokenizerJson(*j, name));
        return std::unique_ptr<Tokenizer>(std::move(tok));
      }
    }
  }
  // Other tokenizers' files, named; they are not read (yet).
  std::string kind;
  if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(contents), "{")) {
    kind = " (it is JSON without a tokenizer model: a GPT-2 vocab.json is read with the "
           "merges.txt beside it)";
  }
  // The line as printable text: a binary file's raw bytes (a NUL cut the
  // message short) never reach the terminal.
  std::string shown;
  for (const char ch : first_line.substr(0, 60)) {
    const unsigned char b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b < 0x7f) {
      shown.push_back(ch);
    } else {
      absl::StrAppend(&shown, "\\x", absl::Hex(b, absl::kZeroPad2));
    }
  }
  return InvalidArgument(
      absl::StrCat("'", name, "' is not a weft tokenizer file (first line '", shown, "')", kind),
      "'weft-tokenizer char v1', 'weft-tokenizer bpe v1', 'weft-tokenizer gpt2 v1', a Hugging "
      "Face tokenizer.json, or GPT-2's vocab.json with merges.txt",
      "tokenizer files are written by //tools:prepare_data (tokenizer.txt in its output)");
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& spec) {
  // "hf:PATH" names a Hugging Face file or model directory explicitly.
  const std::string path = absl::StartsWith(spec, "hf:") ? spec.substr(3) : spec;
  // A Hugging Face directory, or GPT-2's vocab.json with its merges.txt.
  std::error_code ec;
  const std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec)) {
    if (FileExists((p / "tokenizer.json").string())) return LoadTokenizer((p / "tokenizer.json").string());
    if (FileExists((p / "vocab.json").string())) return LoadTokenizer((p / "vocab.json").string());
    return NotFound(absl::StrCat("directory '", path, "' has no tokenizer.json or vocab.json"),
                    "a tokenizer file, or a directory holding tokenizer.json, or vocab.json "
                    "and merges.txt");
  }
  if (p.filename() == "vocab.json") {
    const std::string merges = (p.parent_path() / "merges.txt").string();
    if (!FileExists(merges)) {
      return NotFound(absl::StrCat("'", path, "' without a merges.txt beside it"),
                      "GPT-2's vocab.json and merges.txt in one directory");
    }
    WEFT_ASSIGN_OR_RETURN(std::string vocab, ReadFileToString(path));
    WEFT_ASSIGN_OR_RETURN(std::string merge_text, ReadFileToString(merges));
    WEFT_ASSIGN_OR_RETURN(auto tok, Gpt2Tokenizer::FromVocabAndMerges(vocab, merge_text, path));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (!FileExists(path)) {
    return NotFound(absl::StrCat("tokenizer file '", path, "' does not exist"),
                    "an existing tokenizer file, or a spec: char, bpe, bpe:<vocab size>",
                    "prepare_data writes tokenizer.txt next to the shards");
  }
  WEFT_ASSIGN_OR_RETURN(std::string contents, ReadFileToString(path));
  return ParseTokenizer(contents, path);
}

bool IsTokenizerSpec(absl::string_view spec) {
  return spec == CharTokenizer::kKind || spec == BpeTokenizer::kKind ||
         absl::StartsWith(spec, "bpe:");
}

absl::StatusOr<std::unique_ptr<Tokenizer>> BuildTokenizer(
    absl::string_view spec, absl::Span<const absl::string_view> documents,
    const std::function<void(int64_t, int64_t)>& progress) {
  if (spec == CharTokenizer::kKind) {
    WEFT_ASSIGN_OR_RETURN(auto tok, CharTokenizer::Build(documents));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (spec == BpeTokenizer::kKind || absl::StartsWith(spec, "bpe:")) {
    BpeTrainOptions options;
    options.vocab_size = kDefaultBpeVocab;
    options.progress = progress;
    if (spec != BpeTokenizer::kKind && !absl::SimpleAtoi(spec.substr(4), &options.vocab_size)) {
      return InvalidArgument(absl::StrCat("tokenizer spec '", spec, "'"),
                             "bpe:<vocab size>, e.g. bpe:4096");
    }
    WEFT_ASSIGN_OR_RETURN(auto tok, TrainBpe(documents, options));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  return InvalidArgument(absl::StrCat("tokenizer spec '", spec, "'"),
                         "'char', 'bpe' or 'bpe:<vocab size>'");
}

}  // namespace weft::data
