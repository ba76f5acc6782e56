#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <climits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "data/chunk_id_cache.h"
#include "data/pretokenizer.h"

namespace weft::data {
namespace {

constexpr char kHeader[] = "weft-tokenizer bpe v1";
// Bounds the per-call chunk cache; natural text has far fewer distinct chunks.

}  // namespace

BpeTokenizer::BpeTokenizer(std::vector<BpeMerge> merges) : merges_(std::move(merges)) {
  token_bytes_.reserve(kNumByteTokens + merges_.size());
  for (int b = 0; b < kNumByteTokens; ++b) token_bytes_.push_back(std::string(1, char(b)));
  rank_.reserve(merges_.size());
  for (size_t r = 0; r < merges_.size(); ++r) {
    rank_[PairKey(merges_[r].left, merges_[r].right)] = static_cast<int32_t>(r);
    token_bytes_.push_back(token_bytes_[merges_[r].left] + token_bytes_[merges_[r].right]);
  }
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromMerges(
    std::vector<BpeMerge> merges) {
  if (static_cast<int64_t>(merges.size()) > kMaxMerges) {
    return InvalidArgument(absl::StrCat(merges.size(), " BPE merges"),
                           absl::StrCat("at most ", kMaxMerges));
  }
  absl::flat_hash_map<uint64_t, int32_t> seen;
  for (size_t r = 0; r < merges.size(); ++r) {
    const int64_t limit = kNumByteTokens + static_cast<int64_t>(r);
    const BpeMerge& m = merges[r];
    if (m.left < 0 || m.right < 0 || m.left >= limit || m.right >= limit) {
      return InvalidArgument(absl::StrCat("BPE merge ", r, " (", m.left, ", ", m.right, ")"),
                             absl::StrCat("ids in [0, ", limit, "): merges build on earlier ids"));
    }
    if (!seen.emplace(PairKey(m.left, m.right), static_cast<int32_t>(r)).second) {
      return InvalidArgument(absl::StrCat("BPE merge ", r, " (", m.left, ", ", m.right,
                                          ") repeats merge ", seen[PairKey(m.left, m.right)]),
                             "each pair merged once");
    }
  }
  return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(std::move(merges)));
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Parse(absl::string_view contents,
                                                                  absl::string_view name) {
  std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  const auto bad = [&](absl::string_view what) {
    return InvalidArgument(absl::StrCat("BPE tokenizer file '", name, "': ", what),
                           "the format Save writes (header, '<M> merges', M lines 'left right')",
                           "regenerate it with //tools:prepare_data --tokenizer=bpe");
  };
  if (lines.size() < 2 || lines[0] != kHeader) return bad("missing 'weft-tokenizer bpe v1'");
  std::vector<absl::string_view> count_line = absl::StrSplit(lines[1], ' ');
  int64_t count = 0;
  if (count_line.size() != 2 || count_line[1] != "merges" ||
      !absl::SimpleAtoi(count_line[0], &count) || count < 0) {
    return bad(absl::StrCat("bad merge count line '", lines[1], "'"));
  }
  if (static_cast<int64_t>(lines.size()) - 2 != count) {
    return bad(absl::StrCat("header says ", count, " merges, file lists ", lines.size() - 2));
  }
  std::vector<BpeMerge> merges;
  merges.reserve(count);
  for (size_t i = 2; i < lines.size(); ++i) {
    std::vector<absl::string_view> parts = absl::StrSplit(lines[i], ' ');
    BpeMerge m;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &m.left) ||
        !absl::SimpleAtoi(parts[1], &m.right)) {
      return bad(absl::StrCat("bad merge '", lines[i], "' on line ", i + 1));
    }
    merges.push_back(m);
  }
  auto tok = FromMerges(std::move(merges));
  if (!tok.ok()) return Annotate(tok.status(), absl::StrCat("BPE tokenizer file '", name, "'"));
  return tok;
}

void BpeTokenizer::EncodeChunk(absl::string_view chunk, std::vector<int32_t>* ids) const {
  int32_t syms[kMaxChunkBytes];
  size_t n = chunk.size();
  for (size_t i = 0; i < n; ++i) syms[i] = static_cast<uint8_t>(chunk[i]);
  // Lowest rank first, all its occurrences left to right: the order in which
  // training applied the merges (a merge's ids never exist before it).
  while (n >= 2) {
    int32_t best = INT32_MAX;
    for (size_t i = 0; i + 1 < n; ++i) {
      const auto it = rank_.find(PairKey(syms[i], syms[i + 1]));
      if (it != rank_.end() && it->second < best) best = it->second;
    }
    if (best == INT32_MAX) break;
    const BpeMerge m = merges_[best];
    const int32_t merged = kNumByteTokens + best;
    size_t out = 0;
    for (size_t i = 0; i < n;) {
      if (i + 1 < n && syms[i] == m.left && syms[i + 1] == m.right) {
        syms[out++] = merged;
        i += 2;
      } else {
        syms[out++] = syms[i++];
      }
    }
    n = out;
  }
  ids->insert(ids->end(), syms, syms + n);
}

absl::Status BpeTokenizer::EncodeAppend(absl::string_view text,
                                        std::vector<int32_t>* ids) const {
  ids->reserve(ids->size() + text.size() / 3);
  EncodeChunksCached(
      text, ChunkEnd,
      [this](absl::string_view chunk, std::vector<int32_t>* out) {
        if (chunk.size() == 1) {
          out->push_back(static_cast<uint8_t>(chunk[0]));
        } else {
          EncodeChunk(chunk, out);
        }
      },
      ids);
  return absl::OkStatus();
}

absl::StatusOr<std::string> BpeTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  const int32_t eot = eot_id();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id >= 0 && id < eot) {
      out.append(token_bytes_[id]);
    } else if (id == eot) {
      out.append(kEndOfText);
    } else {
      return InvalidArgument(absl::StrCat("token id ", id, " at position ", i),
                             absl::StrCat("ids in [0, ", vocab_size(), ") for this BPE vocabulary"));
    }
  }
  return out;
}

std::string BpeTokenizer::Serialize() const {
  std::string out = absl::StrCat(kHeader, "\n", merges_.size(), " merges\n");
  for (const BpeMerge& m : merges_) absl::StrAppend(&out, m.left, " ", m.right, "\n");
  return out;
}

}  // namespace weft::data
