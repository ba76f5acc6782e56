// OpenTextData (data.h): text files, a shard, or a shard directory -> loaders.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
  std::string tokenizer_path;  // the file it came from, when it came from one
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
                                                                    const std::string& fallback,
                                                                    std::string* used_path) {
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
  *used_path = path;
  return std::shared_ptr<const Tokenizer>(std::move(tok));
}

// Whether `word` appears in the file name of `path` delimited by
// non-alphanumeric characters: "fineweb_val_000000.bin" names the val split,
// "medieval_train_000000.bin" does not.
bool NamesSplitAsWord(absl::string_view path, absl::string_view word) {
  const absl::string_view name = path.substr(path.rfind('/') + 1);
  for (size_t pos = 0; (pos = name.find(word, pos)) != absl::string_view::npos; ++pos) {
    const size_t end = pos + word.size();
    if ((pos == 0 || !absl::ascii_isalnum(name[pos - 1])) &&
        (end == name.size() || !absl::ascii_isalnum(name[end]))) {
      return true;
    }
  }
  return false;
}

// A file whose name contains both "train" and "val" ("medieval_train_0.bin",
// "interval_val_0.bin") goes to the split it names as a word; validating on
// training shards would report a loss the model was trained on.
absl::Status SeparateSplits(std::vector<std::string>* train, std::vector<std::string>* val) {
  const auto in = [](const std::vector<std::string>& files, const std::string& f) {
    return std::find(files.begin(), files.end(), f) != files.end();
  };
  std::vector<std::string> only_train, only_val;
  for (const std::string& f : *train) {
    if (!in(*val, f)) only_train.push_back(f);
  }
  for (const std::string& f : *val) {
    if (!in(*train, f)) only_val.push_back(f);
  }
  for (const std::string& f : *train) {
    if (!in(*val, f)) continue;
    const bool t = NamesSplitAsWord(f, "train");
    const bool v = NamesSplitAsWord(f, "val");
    if (t == v) {
      return InvalidArgument(
          absl::StrCat("shard '", f, "' could belong to the train or the val split"),
          "a file name with exactly one of 'train' and 'val' as a word (train_000000.bin, "
          "fineweb_val_000001.bin)",
          "rename the file");
    }
    (t ? only_train : only_val).push_back(f);
  }
  std::sort(only_train.begin(), only_train.end());
  std::sort(only_val.begin(), only_val.end());
  *train = std::move(only_train);
  *val = std::move(only_val);
  return absl::OkStatus();
}

absl::StatusOr<Sources> FromShardDir(const TextDataOptions& options) {
  Sources s;
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> train, ListFiles(options.path, "train", ".bin"));
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> val, ListFiles(options.path, "val", ".bin"));
  WEFT_RETURN_IF_ERROR(SeparateSplits(&train, &val));
  if (train.empty()) {
    return NotFound(absl::StrCat("no training shards in '", options.path, "'"),
                    "files named *train*.bin (and *val*.bin for validation)",
                    "make them with bazel run //tools:prepare_data -- --input=... --out=DIR");
  }
  WEFT_ASSIGN_OR_RETURN(s.train, OpenAll(train));
  WEFT_ASSIGN_OR_RETURN(s.val, OpenAll(val));
  WEFT_ASSIGN_OR_RETURN(s.tokenizer,
                        MaybeLoadTokenizer(options.tokenizer,
                                           JoinPath(options.path, kTokenizerFileName),
                                           &s.tokenizer_path));
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
    WEFT_ASSIGN_OR_RETURN(s.tokenizer,
                          MaybeLoadTokenizer(options.tokenizer, "", &s.tokenizer_path));
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

// Shards record the vocabulary size of the tokenizer that wrote them (0 for
// llm.c's). Two sizes in one data set, or a size other than the tokenizer's,
// mean ids from different tokenizers: training would mix ids that mean
// different text, and the checkpoint would carry a tokenizer that decodes
// the model's ids wrongly.
absl::Status CheckOneVocabulary(const Sources& s) {
  const TokenBuffer* first = nullptr;
  for (const std::vector<TokenBuffer>* part : {&s.train, &s.val}) {
    for (const TokenBuffer& b : *part) {
      if (b.vocab_size() == 0) continue;
      if (s.tokenizer != nullptr && b.vocab_size() != s.tokenizer->vocab_size()) {
        return InvalidArgument(
            absl::StrCat("shard ", b.name(), " was written by a tokenizer of ", b.vocab_size(),
                         " ids, but the tokenizer ",
                         s.tokenizer_path.empty() ? "" : absl::StrCat("'", s.tokenizer_path, "' "),
                         "has ", s.tokenizer->vocab_size()),
            "the tokenizer the shards were made with",
            "keep each prepare_data output directory whole, or pass --tokenizer=FILE with the "
            "tokenizer.txt written beside these shards");
      }
      if (first == nullptr) {
        first = &b;
      } else if (b.vocab_size() != first->vocab_size()) {
        return InvalidArgument(
            absl::StrCat("shards of different tokenizers: ", first->name(), " records a ",
                         first->vocab_size(), "-id vocabulary, ", b.name(), " one of ",
                         b.vocab_size()),
            "every shard written with the same tokenizer",
            "keep each prepare_data output directory whole (it writes tokenizer.txt and its "
            "shards together)");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

class TextSourceCache {
 public:
  // The sources of text files for `options`: kept from the first call whose
  // path, tokenizer and split they share, else read now.
  absl::StatusOr<Sources> Get(const TextDataOptions& options) {
    const std::string key = absl::StrCat(options.path, "\n", options.tokenizer, "\n",
                                         absl::StrFormat("%.17g", options.val_fraction));
    std::lock_guard<std::mutex> lock(mu_);
    if (key != key_) {
      WEFT_ASSIGN_OR_RETURN(sources_, FromTextFiles(options));
      key_ = key;
    }
    return sources_;  // a copy: token buffers share their memory
  }

 private:
  std::mutex mu_;
  std::string key_;
  Sources sources_;
};

std::shared_ptr<TextSourceCache> MakeTextSourceCache() {
  return std::make_shared<TextSourceCache>();
}

absl::StatusOr<TextData> OpenTextData(const TextDataOptions& options) {
  if (options.path.empty()) {
    return InvalidArgument("empty data path", "text files, a .bin shard or a shard directory");
  }
  Sources sources;
  if (IsDirectory(options.path)) {
    WEFT_ASSIGN_OR_RETURN(sources, FromShardDir(options));
  } else if (absl::EndsWith(options.path, ".bin")) {
    WEFT_ASSIGN_OR_RETURN(sources.train, OpenAll({options.path}));
    WEFT_ASSIGN_OR_RETURN(sources.tokenizer,
                          MaybeLoadTokenizer(options.tokenizer, "", &sources.tokenizer_path));
  } else if (options.cache != nullptr) {
    WEFT_ASSIGN_OR_RETURN(sources, options.cache->Get(options));
  } else {
    WEFT_ASSIGN_OR_RETURN(sources, FromTextFiles(options));
  }

  WEFT_RETURN_IF_ERROR(CheckOneVocabulary(sources));

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
