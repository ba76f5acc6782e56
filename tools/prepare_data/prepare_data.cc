#include "tools/prepare_data/prepare_data.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/file_util.h"
#include "data/text_corpus.h"
#include "data/token_shard.h"
#include "data/tokenizer_factory.h"
#include "tools/prepare_data/progress_bar.h"

namespace weft::tools {
namespace {

namespace fs = std::filesystem;
using data::TextDocument;
using data::Tokenizer;

constexpr int64_t kProgressMinBytes = 4 << 20;
constexpr int64_t kProgressMinMerges = 2000;

absl::StatusOr<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& input : inputs) {
    if (!data::IsDirectory(input)) {
      out.push_back(input);
      continue;
    }
    std::vector<std::string> files;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(input, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_symlink(ec) || !e.is_regular_file(ec) || absl::EndsWith(name, ".dat")) continue;
      files.push_back(e.path().string());
    }
    if (files.empty()) {
      return InvalidArgument(absl::StrCat("input directory '", input, "' has no text files"),
                             "regular files (symlinks and *.dat are skipped)");
    }
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const PrepareOptions& options,
                                                         const std::vector<TextDocument>& docs,
                                                         const data::TrainValSplit& split) {
  if (!data::IsTokenizerSpec(options.tokenizer)) return data::LoadTokenizer(options.tokenizer);
  // The char vocabulary must cover the validation text; BPE learns from the
  // training split only and encodes anything.
  std::vector<absl::string_view> all;
  for (const TextDocument& d : docs) all.push_back(d.text);
  const bool is_char = options.tokenizer == "char";
  std::optional<ProgressBar> bar;
  const auto progress = [&](int64_t done, int64_t total) {
    if (!options.progress) return;
    if (!bar) bar.emplace("bpe merges", total, ProgressBar::Unit::kCount, kProgressMinMerges);
    bar->Update(done);
  };
  return data::BuildTokenizer(options.tokenizer, is_char ? all : split.train, progress);
}

// Removes shards a previous run left, which the loader would otherwise mix in.
void RemoveOldShards(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if ((absl::StartsWith(name, "train_") || absl::StartsWith(name, "val_")) &&
        absl::EndsWith(name, ".bin")) {
      fs::remove(e.path(), ec);
    }
  }
}

absl::Status WriteSplit(const std::string& dir, absl::string_view split,
                        const std::vector<int32_t>& ids, const PrepareOptions& options,
                        int64_t vocab_size, PrepareSummary* summary) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t per_shard = options.shard_tokens;  // checked by PrepareData
  for (int64_t start = 0, index = 0; start < n; start += per_shard, ++index) {
    const std::string path = data::JoinPath(dir, absl::StrFormat("%s_%06d.bin", split, index));
    const int64_t count = std::min(per_shard, n - start);
    WEFT_RETURN_IF_ERROR(data::WriteTokenShard(
        path, absl::MakeConstSpan(ids).subspan(start, count), {.vocab_size = vocab_size}));
    summary->files.push_back(path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Encode(const Tokenizer& tokenizer,
                                            const std::vector<absl::string_view>& part,
                                            absl::string_view label, bool show_progress) {
  std::vector<int32_t> ids;
  int64_t total = 0;
  for (absl::string_view d : part) total += static_cast<int64_t>(d.size());
  ProgressBar bar(std::string(label), total, ProgressBar::Unit::kBytes,
                  show_progress ? kProgressMinBytes : INT64_MAX);
  WEFT_RETURN_IF_ERROR(data::EncodeDocuments(tokenizer, part, &ids,
                                             [&](int64_t done, int64_t) { bar.Update(done); }));
  return ids;
}

}  // namespace

absl::StatusOr<PrepareSummary> PrepareData(const PrepareOptions& options) {
  if (options.out_dir.empty()) {
    return InvalidArgument("no output directory", "--out=<dir>");
  }
  if (options.shard_tokens < 1 || options.shard_tokens > data::kMaxShardTokens) {
    return InvalidArgument(absl::StrCat("--shard_tokens=", options.shard_tokens),
                           absl::StrCat("1 to ", data::kMaxShardTokens,
                                        " tokens per shard (an int32 count)"),
                           "the default, 100000000, is llm.c's shard size");
  }
  for (const std::string& input : options.inputs) {
    std::error_code ec;
    if (data::IsDirectory(input) && fs::equivalent(input, options.out_dir, ec)) {
      // A rerun would read the previous run's tokenizer.txt and shards as text.
      return InvalidArgument(
          absl::StrCat("input directory '", input, "' is the output directory"),
          "an --out directory apart from the text", "write the shards to another directory");
    }
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExpandInputs(options.inputs));
  WEFT_ASSIGN_OR_RETURN(std::vector<TextDocument> docs, data::ReadTextDocuments(paths));
  WEFT_ASSIGN_OR_RETURN(data::TrainValSplit split, data::SplitTrainVal(docs, options.val_fraction));
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) {
    return InvalidArgument(absl::StrCat("cannot create '", options.out_dir, "': ", ec.message()),
                           "a writable output directory");
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, MakeTokenizer(options, docs, split));

  PrepareSummary summary;
  for (const TextDocument& d : docs) summary.input_bytes += static_cast<int64_t>(d.text.size());
  summary.vocab_size = tokenizer->vocab_size();
  WEFT_ASSIGN_OR_RETURN(std::vector<int32_t> train,
                        Encode(*tokenizer, split.train, "encode train", options.progress));
  WEFT_ASSIGN_OR_RETURN(std::vector<int32_t> val,
                        Encode(*tokenizer, split.val, "encode val", options.progress));
  summary.train_tokens = static_cast<int64_t>(train.size());
  summary.val_tokens = static_cast<int64_t>(val.size());

  RemoveOldShards(options.out_dir);
  const std::string tokenizer_path = data::JoinPath(options.out_dir, "tokenizer.txt");
  WEFT_RETURN_IF_ERROR(tokenizer->Save(tokenizer_path));
  summary.files.push_back(tokenizer_path);
  WEFT_RETURN_IF_ERROR(
      WriteSplit(options.out_dir, "train", train, options, summary.vocab_size, &summary));
  WEFT_RETURN_IF_ERROR(
      WriteSplit(options.out_dir, "val", val, options, summary.vocab_size, &summary));
  return summary;
}

}  // namespace weft::tools
