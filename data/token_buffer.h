// TokenBuffer: read-only tokens, either a memory-mapped shard on disk or an
// in-memory vector (raw text tokenized at start-up). Copies share the
// underlying memory, so datasets and worker threads pass them around freely.
//
// Reads convert to int32 (what embedding kernels take) and check every id
// against a limit on the way, so a shard written with another tokenizer
// fails with the file name and position instead of indexing out of bounds.
#ifndef WEFT_DATA_TOKEN_BUFFER_H_
#define WEFT_DATA_TOKEN_BUFFER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/token_shard.h"

namespace weft::data {

class TokenBuffer {
 public:
  // Maps the shard at `path` after validating its header and size.
  static absl::StatusOr<TokenBuffer> OpenShard(const std::string& path);
  // Copies `tokens` (ids in [0, vocab_size) when vocab_size > 0) into memory.
  // `name` stands in for a file name in error messages.
  static absl::StatusOr<TokenBuffer> FromTokens(std::string name,
                                                absl::Span<const int32_t> tokens,
                                                int64_t vocab_size);

  const std::string& name() const { return name_; }
  int64_t size() const { return size_; }
  int64_t vocab_size() const { return vocab_size_; }  // 0 = unknown
  TokenWidth width() const { return width_; }

  // Copies tokens [start, start + count) to `dst` as int32. With limit > 0,
  // an id >= limit is an InvalidArgument naming the file and the position.
  // Thread-safe.
  absl::Status Read(int64_t start, int64_t count, int32_t* dst, int64_t limit) const;
  absl::StatusOr<std::vector<int32_t>> ReadAll(int64_t limit = 0) const;

 private:
  TokenBuffer() = default;

  std::shared_ptr<const void> owner_;  // MappedFile or the in-memory tokens
  const uint8_t* tokens_ = nullptr;
  int64_t size_ = 0;
  int64_t vocab_size_ = 0;
  TokenWidth width_ = TokenWidth::kU16;
  std::string name_;
};

}  // namespace weft::data

#endif  // WEFT_DATA_TOKEN_BUFFER_H_
