// OpenTextData (data.h): text files, a shard, or a shard directory -> loaders.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/data.h"
#include "data/file_util.h"
#include "data/text_corpus.h"
#include "data/token_buffer.h"
#include "data/token_window_dataset.h"
#include "data/tokenizer_factory.h"

namespace weft::data {
namespace {

constexpr char kTokenizerFileName[] = "tokenizer.txt";

struct Sources {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<TokenBuffer> train;
  std::vector<TokenBuffer> val;
};

absl::StatusOr<std::vector<TokenBuffer>> OpenAll(const std::vector<std::string>& paths) {
  std::vector<TokenBuffer> out;
  for (const std::string& p : paths) {
    WEFT_ASSIGN_OR_RETURN(TokenBuffer b, TokenBuffer::OpenShard(p));
    out.push_back(std::move(b));
  }
  return out;
}

// A tokenizer file named by the options, else `fallback` if it exists.
absl::StatusOr<std::shared_ptr<const Tokenizer>> MaybeLoadTokenizer(const std::string& spec,
                                                                    const std::string& fallback) {
  // Shards hold token ids already: a spec that would build a tokenizer from
  // text ("bpe:1024") cannot apply to them. "char" is the flag's default.
  if (IsTokenizerSpec(spec) && spec != "char") {
    return InvalidArgument(
        absl::StrCat("--tokenizer=", spec, " with token shards"),
        "a tokenizer file, or no --tokenizer (the shards' own tokenizer.txt is used)",
        "shards are tokenized when prepare_data writes them: pass --tokenizer there, or train "
        "on the text files instead");
  }
  std::string path;
  if (!spec.empty() && !IsTokenizerSpec(spec)) {
    path = spec;
  } else if (!fallback.empty() && FileExists(fallback)) {
    path = fallback;
  } else {
    return std::shared_ptr<const Tokenizer>();
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadTokenizer(path));
  return std::shared_ptr<const Tokenizer>(std::move(tok));
}

absl::StatusOr<Sources> FromShardDir(const TextDataOptions& options) {
  Sources s;
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> train, ListFiles(options.path, "train", ".bin"));
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> val, ListFiles(options.path, "val", ".bin"));
  if (train.empty()) {
    return NotFound(absl::StrCat("no training shards in '", options.path, "'"),
                    "files named *train*.bin (and *val*.bin for validation)",
                    "make them with bazel run //tools:prepare_data -- --input=... --out=DIR");
  }
  WEFT_ASSIGN_OR_RETURN(s.train, OpenAll(train));
  WEFT_ASSIGN_OR_RETURN(s.val, OpenAll(val));
  WEFT_ASSIGN_OR_RETURN(s.tokenizer, MaybeLoadTokenizer(options.tokenizer,
                                                        JoinPath(options.path, kTokenizerFileName)));
  return s;
}

absl::StatusOr<Sources> FromTextFiles(const TextDataOptions& options) {
  Sources s;
  const std::vector<std::string> paths = absl::StrSplit(options.path, ',', absl::SkipEmpty());
  WEFT_ASSIGN_OR_RETURN(std::vector<TextDocument> docs, ReadTextDocuments(paths));
  WEFT_ASSIGN_OR_RETURN(TrainValSplit split, SplitTrainVal(docs, options.val_fraction));
  if (IsTokenizerSpec(options.tokenizer)) {
    // The char vocabulary must cover validation text too; BPE learns from
    // training text only, and encodes anything.
    std::vector<absl::string_view> all;
    for (const TextDocument& d : docs) all.push_back(d.text);
    const bool is_char = !absl::StartsWith(options.tokenizer, "bpe");
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok,
                          BuildTokenizer(options.tokenizer, is_char ? all : split.train));
    s.tokenizer = std::move(tok);
  } else {
    WEFT_ASSIGN_OR_RETURN(s.tokenizer, MaybeLoadTokenizer(options.tokenizer, ""));
  }
  const auto encode = [&](const std::vector<absl::string_view>& part, absl::string_view name,
                          std::vector<TokenBuffer>* out) -> absl::Status {
    if (part.empty()) return absl::OkStatus();
    std::vector<int32_t> ids;
    WEFT_RETURN_IF_ERROR(EncodeDocuments(*s.tokenizer, part, &ids));
    WEFT_ASSIGN_OR_RETURN(TokenBuffer b,
                          TokenBuffer::FromTokens(absl::StrCat(options.path, " (", name, " split)"),
                                                  ids, s.tokenizer->vocab_size()));
    out->push_back(std::move(b));
    return absl::OkStatus();
  };
  WEFT_RETURN_IF_ERROR(encode(split.train, "train", &s.train));
  WEFT_RETURN_IF_ERROR(encode(split.val, "val", &s.val));
  if (s.train.empty()) {
    return InvalidArgument(absl::StrCat("no training text in '", options.path, "'"),
                           "text before the validation split", "lower val_fraction");
  }
  return s;
}

}  // namespace

absl::StatusOr<TextData> OpenTextData(const TextDataOptions& options) {
  if (options.path.empty()) {
    return InvalidArgument("empty data path", "text files, a .bin shard or a shard directory");
  }
  Sources sources;
  if (IsDirectory(options.path)) {
    WEFT_ASSIGN_OR_RETURN(sources, FromShardDir(options));
  } else if (absl::EndsWith(options.path, ".bin")) {
    WEFT_ASSIGN_OR_RETURN(sources.train, OpenAll({options.path}));
    WEFT_ASSIGN_OR_RETURN(sources.tokenizer, MaybeLoadTokenizer(options.tokenizer, ""));
  } else {
    WEFT_ASSIGN_OR_RETURN(sources, FromTextFiles(options));
  }

  TextData out;
  out.tokenizer = sources.tokenizer;
  const int64_t tokenizer_vocab = sources.tokenizer ? sources.tokenizer->vocab_size() : 0;
  if (options.vocab_size > 0 && tokenizer_vocab > options.vocab_size) {
    return InvalidArgument(
        absl::StrCat("vocab_size ", options.vocab_size, " is smaller than the tokenizer's ",
                     tokenizer_vocab),
        "vocab_size >= the tokenizer's vocabulary", "leave vocab_size at 0 to take the tokenizer's");
  }
  out.vocab_size = options.vocab_size > 0 ? options.vocab_size : tokenizer_vocab;
  for (const TokenBuffer& b : sources.train) out.vocab_size = std::max(out.vocab_size, b.vocab_size());
  if (out.vocab_size == 0) {
    return InvalidArgument(
        absl::StrCat("unknown vocabulary size for '", options.path, "'"),
        "a tokenizer file, shards that record their vocabulary, or vocab_size",
        "llm.c shards record none: set vocab_size (50257 for GPT-2)");
  }
  TokenWindowOptions window;
  window.seq_len = options.seq_len;
  window.vocab_size = out.vocab_size;
  WEFT_ASSIGN_OR_RETURN(auto train_set, TokenWindowDataset::Create(std::move(sources.train), window));
  WEFT_ASSIGN_OR_RETURN(out.train, DataLoader::Create(std::move(train_set), options.loader));
  if (!sources.val.empty()) {
    auto val_set = TokenWindowDataset::Create(std::move(sources.val), window);
    if (!val_set.ok()) return Annotate(val_set.status(), "validation split");
    DataLoader::Options val_options = options.loader;
    val_options.shuffle = false;
    val_options.drop_last = false;  // evaluate every window, even a short split
    val_options.global_batch = 0;   // and pad no more than the world size needs
    auto val = DataLoader::Create(*std::move(val_set), val_options);
    if (!val.ok()) return Annotate(val.status(), "validation split");
    out.val = *std::move(val);
  }
  return out;
}

}  // namespace weft::data
