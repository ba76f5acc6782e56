#include "data/token_window_dataset.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::data {

absl::StatusOr<std::shared_ptr<TokenWindowDataset>> TokenWindowDataset::Create(
    std::vector<TokenBuffer> buffers, const TokenWindowOptions& options) {
  const int64_t t = options.seq_len;
  if (t <= 0) {
    return InvalidArgument(absl::StrCat("sequence length ", t), "a positive sequence length");
  }
  if (buffers.empty()) {
    return InvalidArgument("no token buffers for a token window dataset", "at least one shard",
                           "check the data path and the train/val file names");
  }
  int64_t vocab = options.vocab_size;
  for (const TokenBuffer& b : buffers) {
    // A shard that records a larger vocabulary than the model has holds ids
    // the model cannot embed; say so now rather than at some later batch.
    if (options.vocab_size > 0 && b.vocab_size() > options.vocab_size) {
      return InvalidArgument(
          absl::StrCat("shard ", b.name(), " was written for a vocabulary of ", b.vocab_size(),
                       " tokens, larger than the model's ", options.vocab_size),
          "a shard vocabulary <= the model's vocab_size",
          "use the tokenizer the shards were made with, or raise vocab_size");
    }
    if (options.vocab_size == 0) vocab = std::max(vocab, b.vocab_size());
  }
  std::vector<int64_t> starts = {0};
  for (const TokenBuffer& b : buffers) {
    starts.push_back(starts.back() + std::max<int64_t>(b.size() - 1, 0) / t);
  }
  if (starts.back() == 0) {
    int64_t longest = 0;
    for (const TokenBuffer& b : buffers) longest = std::max(longest, b.size());
    return InvalidArgument(
        absl::StrCat("no sequence of ", t, " tokens fits: the longest of ", buffers.size(),
                     " token buffers (", buffers.front().name(), "...) has ", longest, " tokens"),
        absl::StrCat("at least seq_len + 1 = ", t + 1, " tokens in a shard"),
        "use a shorter sequence length or more text");
  }
  return std::shared_ptr<TokenWindowDataset>(
      new TokenWindowDataset(std::move(buffers), std::move(starts), t, vocab));
}

absl::StatusOr<std::shared_ptr<TokenWindowDataset>> TokenWindowDataset::OpenShards(
    const std::vector<std::string>& paths, const TokenWindowOptions& options) {
  std::vector<TokenBuffer> buffers;
  buffers.reserve(paths.size());
  for (const std::string& path : paths) {
    WEFT_ASSIGN_OR_RETURN(TokenBuffer b, TokenBuffer::OpenShard(path));
    buffers.push_back(std::move(b));
  }
  return Create(std::move(buffers), options);
}

std::vector<FieldSpec> TokenWindowDataset::fields() const {
  return {{"inputs", DType::kI32, {seq_len_}}, {"targets", DType::kI32, {seq_len_}}};
}

absl::Status TokenWindowDataset::Fill(int64_t index, absl::Span<void* const> dst) const {
  if (index < 0 || index >= num_samples() || dst.size() != 2) {
    return InvalidArgument(absl::StrCat("sample ", index, " with ", dst.size(), " field buffers"),
                           absl::StrCat("an index in [0, ", num_samples(), ") and 2 buffers"));
  }
  const size_t b = static_cast<size_t>(
      std::upper_bound(starts_.begin(), starts_.end(), index) - starts_.begin() - 1);
  const int64_t start = (index - starts_[b]) * seq_len_;
  auto* inputs = static_cast<int32_t*>(dst[0]);
  auto* targets = static_cast<int32_t*>(dst[1]);
  WEFT_RETURN_IF_ERROR(buffers_[b].Read(start, seq_len_, inputs, vocab_size_));
  // Targets are inputs shifted by one: copy the overlap, read the last token.
  std::copy(inputs + 1, inputs + seq_len_, targets);
  return buffers_[b].Read(start + seq_len_, 1, targets + seq_len_ - 1, vocab_size_);
}

int64_t TokenWindowDataset::num_tokens() const {
  int64_t n = 0;
  for (const TokenBuffer& b : buffers_) n += b.size();
  return n;
}

std::string TokenWindowDataset::Describe() const {
  return absl::StrCat("token windows (T=", seq_len_, ", ", num_samples(), " samples) over ",
                      buffers_.size() == 1 ? buffers_[0].name()
                                           : absl::StrCat(buffers_.size(), " buffers from ",
                                                          buffers_[0].name()));
}

}  // namespace weft::data
