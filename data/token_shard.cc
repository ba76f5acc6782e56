#include "data/token_shard.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/file_util.h"

namespace weft::data {
namespace {

// Shards are little-endian on disk; every machine weft targets (x86-64,
// aarch64 Linux) is too, so headers and tokens are read in place.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards assume little-endian");

constexpr char kFormatHint[] =
    "token shards come from //tools:prepare_data or llm.c's dev/data scripts "
    "(256 x int32 header, then the tokens)";

}  // namespace

TokenWidth WidthForVocab(int64_t vocab_size) {
  return vocab_size > 65536 ? TokenWidth::kU32 : TokenWidth::kU16;
}

absl::StatusOr<ShardHeader> ParseShardHeader(absl::string_view name, const uint8_t* bytes,
                                             size_t file_size) {
  if (file_size < kShardHeaderBytes) {
    return InvalidArgument(
        absl::StrCat("truncated shard header: '", name, "' has ", file_size, " bytes"),
        absl::StrCat("at least ", kShardHeaderBytes, " bytes (a 256 x int32 header)"),
        kFormatHint);
  }
  int32_t h[4];
  std::memcpy(h, bytes, sizeof(h));
  ShardHeader header;
  if (h[0] == kShardMagicU16) {
    header.width = TokenWidth::kU16;
    if (h[1] != kShardVersionU16) {
      return InvalidArgument(
          absl::StrCat("unsupported shard version ", h[1], " in '", name, "' (magic ", h[0], ")"),
          absl::StrCat("version ", kShardVersionU16, " for uint16 shards"), kFormatHint);
    }
  } else if (h[0] == kShardMagicU32) {
    header.width = TokenWidth::kU32;
    if (h[1] != kShardVersionU32) {
      return InvalidArgument(
          absl::StrCat("unsupported shard version ", h[1], " in '", name, "' (magic ", h[0], ")"),
          absl::StrCat("version ", kShardVersionU32, " for uint32 shards"), kFormatHint);
    }
  } else {
    return InvalidArgument(
        absl::StrCat("wrong magic ", h[0], " in '", name, "'"),
        absl::StrCat(kShardMagicU16, " (uint16 tokens) or ", kShardMagicU32, " (uint32 tokens)"),
        kFormatHint);
  }
  if (h[2] < 0 || h[3] < 0) {
    return InvalidArgument(absl::StrCat("corrupt shard header in '", name, "': token count ",
                                        h[2], ", vocab size ", h[3]),
                           "non-negative counts", kFormatHint);
  }
  header.num_tokens = h[2];
  header.vocab_size = h[3];
  const size_t width = TokenBytes(header.width);
  const size_t expected = kShardHeaderBytes + static_cast<size_t>(header.num_tokens) * width;
  if (file_size < expected) {
    return InvalidArgument(
        absl::StrCat("truncated shard '", name, "': header says ", header.num_tokens,
                     " tokens but the file holds only ", (file_size - kShardHeaderBytes) / width),
        absl::StrCat(expected, " bytes, found ", file_size),
        "the file was cut short (interrupted copy or download); regenerate it");
  }
  if (file_size > expected) {
    return InvalidArgument(
        absl::StrCat("token count mismatch in '", name, "': header says ", header.num_tokens,
                     " tokens but the file holds ", (file_size - kShardHeaderBytes) / width,
                     (file_size - kShardHeaderBytes) % width ? " and a partial token" : ""),
        absl::StrCat(expected, " bytes, found ", file_size),
        "the header and the data disagree; regenerate the shard");
  }
  return header;
}

std::string EncodeShardHeader(const ShardHeader& header) {
  int32_t h[kShardHeaderInts] = {};
  const bool u16 = header.width == TokenWidth::kU16;
  h[0] = u16 ? kShardMagicU16 : kShardMagicU32;
  h[1] = u16 ? kShardVersionU16 : kShardVersionU32;
  h[2] = static_cast<int32_t>(header.num_tokens);
  h[3] = static_cast<int32_t>(header.vocab_size);
  return std::string(reinterpret_cast<const char*>(h), sizeof(h));
}

absl::Status WriteTokenShard(const std::string& path, absl::Span<const int32_t> tokens,
                             const ShardWriteOptions& options) {
  if (static_cast<int64_t>(tokens.size()) > kMaxShardTokens) {
    return InvalidArgument(absl::StrCat(tokens.size(), " tokens for one shard '", path, "'"),
                           absl::StrCat("at most ", kMaxShardTokens, " (int32 count)"),
                           "split the corpus into several shards");
  }
  if (options.vocab_size < 0 || options.vocab_size > INT32_MAX) {
    return InvalidArgument(absl::StrCat("vocab size ", options.vocab_size),
                           "0 (unknown) or a positive int32");
  }
  int64_t max_id = -1;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || (options.vocab_size > 0 && t >= options.vocab_size)) {
      return InvalidArgument(
          absl::StrCat("token id ", t, " at position ", i, " for shard '", path, "'"),
          options.vocab_size > 0 ? absl::StrCat("ids in [0, ", options.vocab_size, ")")
                                 : std::string("non-negative ids"),
          "the tokens come from a different tokenizer than the vocabulary size says");
    }
    max_id = std::max<int64_t>(max_id, t);
  }
  ShardHeader header;
  header.num_tokens = static_cast<int64_t>(tokens.size());
  header.vocab_size = options.vocab_size;
  header.width = options.force_u32 ? TokenWidth::kU32
                                   : WidthForVocab(options.vocab_size > 0 ? options.vocab_size
                                                                          : max_id + 1);
  std::string out = EncodeShardHeader(header);
  const size_t width = TokenBytes(header.width);
  out.resize(kShardHeaderBytes + tokens.size() * width);
  char* dst = out.data() + kShardHeaderBytes;
  if (header.width == TokenWidth::kU16) {
    auto* p = reinterpret_cast<uint16_t*>(dst);
    for (size_t i = 0; i < tokens.size(); ++i) p[i] = static_cast<uint16_t>(tokens[i]);
  } else {
    auto* p = reinterpret_cast<uint32_t*>(dst);
    for (size_t i = 0; i < tokens.size(); ++i) p[i] = static_cast<uint32_t>(tokens[i]);
  }
  return WriteFileAtomically(path, out);
}

}  // namespace weft::data
