// Token shard format: llm.c's `.bin` layout, so data prepared for llm.c works
// unchanged, plus the uint32 variant llm.c uses for large vocabularies.
//
//   bytes [0, 1024)   header: 256 little-endian int32
//     header[0]       magic    20240520 -> uint16 tokens (GPT-2 style, vocab <= 65536)
//                              20240801 -> uint32 tokens (vocab > 65536, llm.c's llama-3 layout)
//     header[1]       version  1 with magic 20240520, 7 with magic 20240801
//     header[2]       number of tokens N (int32, so at most 2^31 - 1 per shard)
//     header[3]       weft extension: vocabulary size, 0 = unknown. llm.c writes 0
//                     here and ignores it, so shards stay interchangeable.
//     header[4..255]  zero
//   bytes [1024, ...) N tokens, little-endian uint16 or uint32; nothing after.
//
// Writers go through a temporary file and a rename, so a shard under its
// final name is always complete.
#ifndef WEFT_DATA_TOKEN_SHARD_H_
#define WEFT_DATA_TOKEN_SHARD_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace weft::data {

inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardVersionU16 = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;
inline constexpr int kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);
inline constexpr int64_t kMaxShardTokens = INT32_MAX;

// Bytes per token on disk.
enum class TokenWidth : uint8_t { kU16 = 2, kU32 = 4 };

inline size_t TokenBytes(TokenWidth width) { return static_cast<size_t>(width); }

// The narrowest width that holds every id of a `vocab_size` vocabulary.
TokenWidth WidthForVocab(int64_t vocab_size);

struct ShardHeader {
  TokenWidth width = TokenWidth::kU16;
  int64_t num_tokens = 0;
  int64_t vocab_size = 0;  // 0 = unknown (llm.c shards)
};

// Validates a shard's header against the file's size. `name` goes into the
// error messages (wrong magic, unknown version, truncated header or tokens,
// token count mismatch).
absl::StatusOr<ShardHeader> ParseShardHeader(absl::string_view name, const uint8_t* bytes,
                                             size_t file_size);

// The 1024 header bytes for `header`.
std::string EncodeShardHeader(const ShardHeader& header);

struct ShardWriteOptions {
  // Ids must be < vocab_size. 0 = unknown: the width then follows the largest id.
  int64_t vocab_size = 0;
  // Force a width; by default WidthForVocab(vocab_size).
  bool force_u32 = false;
};

// Writes `tokens` as one shard at `path` (atomically). Fails without writing
// on a negative id, an id >= vocab_size, an id that does not fit the width,
// or more than kMaxShardTokens tokens.
absl::Status WriteTokenShard(const std::string& path, absl::Span<const int32_t> tokens,
                             const ShardWriteOptions& options = {});

}  // namespace weft::data

#endif  // WEFT_DATA_TOKEN_SHARD_H_
