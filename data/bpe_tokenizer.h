// BpeTokenizer: byte-level byte-pair encoding (the GPT-2 scheme, our own
// implementation). Ids 0..255 are the bytes themselves, id 256 + r is the
// r-th learned merge, and the last id is the end-of-text token that
// separates documents. Every byte string encodes, and Decode(Encode(s)) == s
// exactly for any s (invalid UTF-8 and NUL bytes included).
//
// Encoding pre-tokenizes (pretokenizer.h), then applies merges inside each
// chunk lowest rank first, which reproduces the segmentation training saw.
// Repeated chunks are looked up in a per-call cache: natural text repeats
// its words, so most chunks cost one hash lookup.
//
// File format (text): "weft-tokenizer bpe v1", then "<M> merges", then M
// lines "<left id> <right id>"; merge r creates id 256 + r.
// vocab_size = 256 + M + 1.
#ifndef WEFT_DATA_BPE_TOKENIZER_H_
#define WEFT_DATA_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace weft::data {

struct BpeMerge {
  int32_t left = 0;
  int32_t right = 0;
  friend bool operator==(const BpeMerge& a, const BpeMerge& b) {
    return a.left == b.left && a.right == b.right;
  }
};

class BpeTokenizer : public Tokenizer {
 public:
  static constexpr char kKind[] = "bpe";
  static constexpr int32_t kNumByteTokens = 256;
  static constexpr char kEndOfText[] = "<|endoftext|>";
  static constexpr int64_t kMaxMerges = 1 << 22;

  // Merge r may only use ids below 256 + r, and no pair may repeat.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromMerges(std::vector<BpeMerge> merges);
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Parse(absl::string_view contents,
                                                             absl::string_view name);

  absl::string_view kind() const override { return kKind; }
  int64_t vocab_size() const override { return kNumByteTokens + num_merges() + 1; }
  int32_t eot_id() const override { return kNumByteTokens + static_cast<int32_t>(num_merges()); }
  absl::Status EncodeAppend(absl::string_view text, std::vector<int32_t>* ids) const override;
  // The end-of-text id decodes to "<|endoftext|>".
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  std::string Serialize() const override;

  int64_t num_merges() const { return static_cast<int64_t>(merges_.size()); }
  const std::vector<BpeMerge>& merges() const { return merges_; }
  // The bytes of id (< eot_id()).
  const std::string& TokenBytes(int32_t id) const { return token_bytes_[id]; }

 private:
  explicit BpeTokenizer(std::vector<BpeMerge> merges);
  // Appends the ids of one pre-tokenized chunk (at most kMaxChunkBytes).
  void EncodeChunk(absl::string_view chunk, std::vector<int32_t>* ids) const;

  std::vector<BpeMerge> merges_;
  absl::flat_hash_map<uint64_t, int32_t> rank_;  // (left << 32 | right) -> merge rank
  std::vector<std::string> token_bytes_;        // id -> bytes, for ids below eot_id()
};

// Packs a pair of ids into one hash key.
inline uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace weft::data

#endif  // WEFT_DATA_BPE_TOKENIZER_H_
