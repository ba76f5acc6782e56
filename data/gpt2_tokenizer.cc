#include "data/gpt2_tokenizer.h"

#include <algorithm>
#include <climits>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/bpe_tokenizer.h"  // PairKey
#include "data/chunk_id_cache.h"
#include "data/gpt2_pretokenizer.h"
#include "data/gpt2_tokenizer_internal.h"
#include "data/hex_text.h"

namespace weft::data {
namespace gpt2_internal {

absl::Status Bad(absl::string_view file, absl::string_view what) {
  return InvalidArgument(absl::StrCat(file, ": ", what),
                         "a GPT-2 byte-level BPE tokenizer (vocab.json with merges.txt, or a "
                         "tokenizer.json of a BPE model with the ByteLevel pre-tokenizer)");
}


}  // namespace gpt2_internal
namespace {

using gpt2_internal::Bad;

constexpr char kHeader[] = "weft-tokenizer gpt2 v1";

}  // namespace

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Build(
    std::vector<std::string> tokens, const std::vector<std::pair<int32_t, int32_t>>& merges,
    int32_t eot, Scheme scheme, absl::string_view name) {
  std::unique_ptr<Gpt2Tokenizer> t(new Gpt2Tokenizer());
  const int32_t n = static_cast<int32_t>(tokens.size());
  std::vector<bool> special(tokens.size(), false);
  for (const auto& [text, id] : scheme.specials) {
    if (id < 0 || id >= n || tokens[id] != text) {
      return Bad(name, absl::StrCat("special token \"", absl::CHexEscape(text), "\" has id ", id,
                                    ", which the vocabulary gives another token"));
    }
    special[id] = true;
  }
  if (eot >= 0 && (eot >= n || !special[eot])) {
    return Bad(name, absl::StrCat("end-of-text id ", eot, " is not a special token"));
  }
  // Ordinary tokens by their bytes (the lower id when two spell the same).
  absl::flat_hash_map<std::string, int32_t>& by_bytes = t->by_bytes_;
  for (int32_t i = 0; i < n; ++i) {
    if (!special[i]) by_bytes.emplace(tokens[i], i);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == by_bytes.end()) {
      return Bad(name, absl::StrCat("no token for byte 0x", absl::Hex(b, absl::kZeroPad2),
                                    ": a byte-level vocabulary has all 256"));
    }
    t->byte_id_[b] = it->second;
  }
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto [l, rt] = merges[r];
    if (l < 0 || l >= n || rt < 0 || rt >= n || special[l] || special[rt]) {
      return Bad(name, absl::StrCat("merge ", r, " has ids ", l, " ", rt, " outside the vocabulary"));
    }
    const auto m = by_bytes.find(tokens[l] + tokens[rt]);
    if (m == by_bytes.end()) {
      return Bad(name, absl::StrCat("merge ", r, " makes a token the vocabulary lacks"));
    }
    // A repeated pair keeps its first (lowest) rank, as HF's BPE does.
    t->rank_.emplace(PairKey(l, rt), std::make_pair(static_cast<int32_t>(r), m->second));
  }
  t->tokens_ = std::move(tokens);
  t->merges_ = merges;
  t->eot_ = eot;
  // Longest first: where two specials start at one position, the longer wins.
  std::sort(scheme.specials.begin(), scheme.specials.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  t->scheme_ = std::move(scheme);
  return t;
}


absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Parse(absl::string_view contents,
                                                                    absl::string_view name) {
  const std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n', absl::SkipEmpty());
  auto bad = [&](absl::string_view what) {
    return InvalidArgument(absl::StrCat("GPT-2 tokenizer file '", name, "': ", what),
                           "the format Serialize writes ('weft-tokenizer gpt2 v1', '<V> tokens', "
                           "V hex lines, '<M> merges', M lines 'left right', 'eot <id>')");
  };
  size_t at = 0;
  auto count = [&](absl::string_view word) -> absl::StatusOr<int64_t> {
    int64_t n = 0;
    const std::vector<absl::string_view> p = absl::StrSplit(at < lines.size() ? lines[at] : "", ' ');
    if (p.size() != 2 || p[1] != word || !absl::SimpleAtoi(p[0], &n) || n < 0 ||
        at + 1 + n > lines.size()) {
      return bad(absl::StrCat("no '<count> ", word, "' line where expected"));
    }
    ++at;
    return n;
  };
  if (lines.empty() || lines[0] != kHeader) return bad("missing 'weft-tokenizer gpt2 v1'");
  at = 1;
  WEFT_ASSIGN_OR_RETURN(int64_t v, count("tokens"));
  std::vector<std::string> tokens(v);
  for (int64_t i = 0; i < v; ++i, ++at) {
    if (lines[at] == "-") continue;  // an empty token (never made by merges)
    if (!FromHex(lines[at], &tokens[i])) return bad(absl::StrCat("bad token line ", at + 1));
  }
  WEFT_ASSIGN_OR_RETURN(int64_t m, count("merges"));
  std::vector<std::pair<int32_t, int32_t>> merges(m);
  for (int64_t i = 0; i < m; ++i, ++at) {
    const std::vector<absl::string_view> p = absl::StrSplit(lines[at], ' ');
    if (p.size() != 2 || !absl::SimpleAtoi(p[0], &merges[i].first) ||
        !absl::SimpleAtoi(p[1], &merges[i].second)) {
      return bad(absl::StrCat("bad merge line ", at + 1));
    }
  }
  int32_t eot = -1;
  const std::vector<absl::string_view> e = absl::StrSplit(at < lines.size() ? lines[at] : "", ' ');
  if (e.size() != 2 || e[0] != "eot" || !absl::SimpleAtoi(e[1], &eot)) return bad("no 'eot <id>' line");
  ++at;
  // Then optionally: "split llama3", "ignore_merges", "<S> specials" and S ids.
  Scheme scheme;
  if (at < lines.size() && lines[at] == "split llama3") scheme.split = Split::kLlama3, ++at;
  if (at < lines.size() && lines[at] == "ignore_merges") scheme.ignore_merges = true, ++at;
  if (at < lines.size()) {
    WEFT_ASSIGN_OR_RETURN(int64_t s, count("specials"));
    for (int64_t i = 0; i < s; ++i, ++at) {
      int32_t id = -1;
      if (!absl::SimpleAtoi(lines[at], &id) || id < 0 || id >= v) {
        return bad(absl::StrCat("bad special id line ", at + 1));
      }
      scheme.specials.emplace_back(tokens[id], id);
    }
  } else if (eot >= 0) {
    scheme.specials.emplace_back(tokens[eot], eot);  // GPT-2's one special
  }
  return Build(std::move(tokens), merges, eot, std::move(scheme), name);
}

std::string Gpt2Tokenizer::Serialize() const {
  std::string out = absl::StrCat(kHeader, "\n", tokens_.size(), " tokens\n");
  for (const std::string& t : tokens_) {
    absl::StrAppend(&out, t.empty() ? "-" : ToHex(t), "\n");
  }
  absl::StrAppend(&out, merges_.size(), " merges\n");
  for (const auto& [l, r] : merges_) absl::StrAppend(&out, l, " ", r, "\n");
  absl::StrAppend(&out, "eot ", eot_, "\n");
  if (scheme_.split == Split::kLlama3) absl::StrAppend(&out, "split llama3\n");
  if (scheme_.ignore_merges) absl::StrAppend(&out, "ignore_merges\n");
  std::vector<int32_t> ids;
  for (const auto& [text, id] : scheme_.specials) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  absl::StrAppend(&out, ids.size(), " specials\n");
  for (int32_t id : ids) absl::StrAppend(&out, id, "\n");
  return out;
}

void Gpt2Tokenizer::EncodeChunk(absl::string_view chunk, std::vector<int32_t>* ids) const {
  if (scheme_.ignore_merges) {
    const auto it = by_bytes_.find(chunk);
    if (it != by_bytes_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> syms(chunk.size());
  for (size_t i = 0; i < chunk.size(); ++i) syms[i] = byte_id_[static_cast<uint8_t>(chunk[i])];
  // Lowest rank first, all its occurrences left to right.
  while (syms.size() >= 2) {
    int32_t best = INT32_MAX, merged = -1;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const auto it = rank_.find(PairKey(syms[i], syms[i + 1]));
      if (it != rank_.end() && it->second.first < best) {
        best = it->second.first;
        merged = it->second.second;
      }
    }
    if (best == INT32_MAX) break;
    const auto [l, r] = merges_[best];
    size_t out = 0;
    for (size_t i = 0; i < syms.size();) {
      if (i + 1 < syms.size() && syms[i] == l && syms[i + 1] == r) {
        syms[out++] = merged;
        i += 2;
      } else {
        syms[out++] = syms[i++];
      }
    }
    syms.resize(out);
  }
  ids->insert(ids->end(), syms.begin(), syms.end());
}

absl::Status Gpt2Tokenizer::EncodeAppend(absl::string_view text, std::vector<int32_t>* ids) const {
  // Special tokens split out first, as Hugging Face does with its added
  // tokens: the earliest occurrence, the longest at one position.
  // Each special's next occurrence at or after `pos`, found again only once
  // passed, so many specials over a long text stay one scan each.
  const auto& specials = scheme_.specials;
  std::vector<size_t> next(specials.size());
  for (size_t i = 0; i < specials.size(); ++i) next[i] = text.find(specials[i].first);
  size_t pos = 0;
  while (true) {
    size_t best = absl::string_view::npos, which = 0;
    for (size_t i = 0; i < specials.size(); ++i) {
      if (next[i] < pos) next[i] = text.find(specials[i].first, pos);
      if (next[i] < best) best = next[i], which = i;  // sorted longest first: ties keep the longer
    }
    if (best == absl::string_view::npos) break;
    EncodeText(text.substr(pos, best - pos), ids);
    ids->push_back(specials[which].second);
    pos = best + specials[which].first.size();
  }
  EncodeText(text.substr(pos), ids);
  return absl::OkStatus();
}

void Gpt2Tokenizer::EncodeText(absl::string_view text, std::vector<int32_t>* ids) const {
  EncodeChunksCached(
      text, scheme_.split == Split::kLlama3 ? Llama3ChunkEnd : Gpt2ChunkEnd,
      [this](absl::string_view chunk, std::vector<int32_t>* out) { EncodeChunk(chunk, out); },
      ids);
}

absl::StatusOr<std::string> Gpt2Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return InvalidArgument(absl::StrCat("token id ", ids[i], " at position ", i),
                             absl::StrCat("ids in [0, ", vocab_size(), ") for this vocabulary"));
    }
    out.append(tokens_[ids[i]]);
  }
  return out;
}

}  // namespace weft::data
