// TokenWindowDataset: next-token prediction samples over token buffers, as in
// llm.c. Sample i of a buffer is its tokens [i*T, i*T + T + 1): the first T
// are "inputs", the last T are "targets" (inputs shifted by one), both int32
// of shape [T]. Windows do not overlap (stride T) and never cross from one
// shard into the next; a buffer of n tokens gives (n - 1) / T windows, and
// the dataset's samples are the windows of every buffer in order.
#ifndef WEFT_DATA_TOKEN_WINDOW_DATASET_H_
#define WEFT_DATA_TOKEN_WINDOW_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset.h"
#include "data/token_buffer.h"

namespace weft::data {

struct TokenWindowOptions {
  int64_t seq_len = 0;     // T
  // Every token read is checked to be < vocab_size; 0 takes the shards'
  // recorded vocabulary size, and skips the check if they have none.
  int64_t vocab_size = 0;
};

class TokenWindowDataset : public Dataset {
 public:
  static absl::StatusOr<std::shared_ptr<TokenWindowDataset>> Create(
      std::vector<TokenBuffer> buffers, const TokenWindowOptions& options);
  // Maps each shard (token_shard.h) and validates its header.
  static absl::StatusOr<std::shared_ptr<TokenWindowDataset>> OpenShards(
      const std::vector<std::string>& paths, const TokenWindowOptions& options);

  int64_t num_samples() const override { return starts_.back(); }
  std::vector<FieldSpec> fields() const override;
  absl::Status Fill(int64_t index, absl::Span<void* const> dst) const override;
  std::string Describe() const override;

  int64_t seq_len() const { return seq_len_; }
  int64_t vocab_size() const { return vocab_size_; }  // 0 = unchecked
  int64_t num_tokens() const;
  const std::vector<TokenBuffer>& buffers() const { return buffers_; }

 private:
  TokenWindowDataset(std::vector<TokenBuffer> buffers, std::vector<int64_t> starts,
                     int64_t seq_len, int64_t vocab_size)
      : buffers_(std::move(buffers)),
        starts_(std::move(starts)),
        seq_len_(seq_len),
        vocab_size_(vocab_size) {}

  std::vector<TokenBuffer> buffers_;
  std::vector<int64_t> starts_;  // first sample of each buffer, plus the total at the end
  int64_t seq_len_;
  int64_t vocab_size_;
};

}  // namespace weft::data

#endif  // WEFT_DATA_TOKEN_WINDOW_DATASET_H_
