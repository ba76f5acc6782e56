#include "data/token_buffer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/mapped_file.h"

namespace weft::data {
namespace {

// Widens and checks in one pass; the check is a branch-free OR so the loop
// stays vectorized, and the slow search for the culprit runs only on error.
template <typename T>
bool WidenAndCheck(const T* src, int64_t count, int32_t* dst, uint32_t limit) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t v = src[i];
    dst[i] = static_cast<int32_t>(v);
    bad |= static_cast<uint32_t>(v >= limit);
  }
  return bad == 0;
}

template <typename T>
int64_t FirstAtOrAbove(const T* src, int64_t count, uint32_t limit) {
  for (int64_t i = 0; i < count; ++i) {
    if (static_cast<uint32_t>(src[i]) >= limit) return i;
  }
  return -1;
}

}  // namespace

absl::StatusOr<TokenBuffer> TokenBuffer::OpenShard(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  WEFT_ASSIGN_OR_RETURN(ShardHeader header, ParseShardHeader(path, file.data(), file.size()));
  auto owned = std::make_shared<MappedFile>(std::move(file));
  TokenBuffer b;
  b.tokens_ = owned->data() + kShardHeaderBytes;
  b.owner_ = std::move(owned);
  b.size_ = header.num_tokens;
  b.vocab_size_ = header.vocab_size;
  b.width_ = header.width;
  b.name_ = path;
  return b;
}

absl::StatusOr<TokenBuffer> TokenBuffer::FromTokens(std::string name,
                                                    absl::Span<const int32_t> tokens,
                                                    int64_t vocab_size) {
  int64_t max_id = -1;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || (vocab_size > 0 && t >= vocab_size)) {
      return InvalidArgument(absl::StrCat("token id ", t, " at position ", i, " of ", name),
                             absl::StrCat("ids in [0, ", vocab_size, ")"));
    }
    if (t > max_id) max_id = t;
  }
  TokenBuffer b;
  b.width_ = WidthForVocab(vocab_size > 0 ? vocab_size : max_id + 1);
  if (b.width_ == TokenWidth::kU16) {
    auto v = std::make_shared<std::vector<uint16_t>>(tokens.begin(), tokens.end());
    b.tokens_ = reinterpret_cast<const uint8_t*>(v->data());
    b.owner_ = std::move(v);
  } else {
    auto v = std::make_shared<std::vector<uint32_t>>(tokens.begin(), tokens.end());
    b.tokens_ = reinterpret_cast<const uint8_t*>(v->data());
    b.owner_ = std::move(v);
  }
  b.size_ = static_cast<int64_t>(tokens.size());
  b.vocab_size_ = vocab_size;
  b.name_ = std::move(name);
  return b;
}

absl::Status TokenBuffer::Read(int64_t start, int64_t count, int32_t* dst, int64_t limit) const {
  if (start < 0 || count < 0 || start + count > size_) {
    return InvalidArgument(absl::StrCat("read of tokens [", start, ", ", start + count, ") from ",
                                        name_),
                           absl::StrCat("a range inside [0, ", size_, ")"));
  }
  // uint32 ids above INT32_MAX would turn negative as int32, so they are
  // always out of range.
  uint32_t lim = limit > 0 && limit <= UINT32_MAX ? static_cast<uint32_t>(limit) : UINT32_MAX;
  if (width_ == TokenWidth::kU32 && lim > 0x80000000u) lim = 0x80000000u;
  bool ok;
  int64_t bad_at = -1;
  if (width_ == TokenWidth::kU16) {
    const auto* src = reinterpret_cast<const uint16_t*>(tokens_) + start;
    ok = WidenAndCheck(src, count, dst, lim);
    if (!ok) bad_at = FirstAtOrAbove(src, count, lim);
  } else {
    const auto* src = reinterpret_cast<const uint32_t*>(tokens_) + start;
    ok = WidenAndCheck(src, count, dst, lim);
    if (!ok) bad_at = FirstAtOrAbove(src, count, lim);
  }
  if (ok) return absl::OkStatus();
  const int64_t pos = start + bad_at;
  const uint32_t id = width_ == TokenWidth::kU16
                          ? reinterpret_cast<const uint16_t*>(tokens_)[pos]
                          : reinterpret_cast<const uint32_t*>(tokens_)[pos];
  return InvalidArgument(
      absl::StrCat("token id ", id, " at position ", pos, " of ", name_, " is out of range"),
      absl::StrCat("ids < ", lim, limit > 0 ? " (the vocabulary size)" : ""),
      "the shard was written with a different tokenizer or vocabulary; regenerate it with "
      "//tools:prepare_data or set the model's vocab_size to match");
}

absl::StatusOr<std::vector<int32_t>> TokenBuffer::ReadAll(int64_t limit) const {
  std::vector<int32_t> out(static_cast<size_t>(size_));
  WEFT_RETURN_IF_ERROR(Read(0, size_, out.data(), limit));
  return out;
}

}  // namespace weft::data
