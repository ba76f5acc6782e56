#include "data/bpe_trainer.h"

#include <queue>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "data/pretokenizer.h"

namespace weft::data {
namespace {

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
  int64_t stamp = -1;  // last merge that visited this word
};

// Max-heap order: higher count first, then the smaller pair key.
struct Candidate {
  int64_t count;
  uint64_t pair;
  bool operator<(const Candidate& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

class Trainer {
 public:
  explicit Trainer(std::vector<Word> words) : words_(std::move(words)) {
    for (int32_t w = 0; w < static_cast<int32_t>(words_.size()); ++w) {
      const Word& word = words_[w];
      for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
        const uint64_t key = PairKey(word.symbols[i], word.symbols[i + 1]);
        counts_[key] += word.count;
        where_[key].push_back(w);
      }
    }
    for (const auto& [key, count] : counts_) heap_.push({count, key});
  }

  // The most frequent pair, or false when no pair is left.
  bool Best(uint64_t* pair) {
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      heap_.pop();
      const auto it = counts_.find(top.pair);
      // Entries are pushed on every change, so a stale one is simply dropped.
      if (it == counts_.end() || it->second != top.count || top.count <= 0) continue;
      *pair = top.pair;
      return true;
    }
    return false;
  }

  void Merge(uint64_t pair, int32_t merged, int64_t stamp) {
    const int32_t left = static_cast<int32_t>(pair >> 32);
    const int32_t right = static_cast<int32_t>(pair & 0xFFFFFFFFu);
    absl::flat_hash_map<uint64_t, int64_t> delta;
    std::vector<int32_t> users = std::move(where_[pair]);
    where_.erase(pair);
    for (int32_t w : users) {
      Word& word = words_[w];
      if (word.stamp == stamp) continue;  // listed once per occurrence
      word.stamp = stamp;
      std::vector<int32_t>& s = word.symbols;
      bool found = false;
      for (size_t i = 0; i + 1 < s.size() && !found; ++i) found = s[i] == left && s[i + 1] == right;
      if (!found) continue;  // stale entry: an earlier merge consumed the pair
      for (size_t i = 0; i + 1 < s.size(); ++i) delta[PairKey(s[i], s[i + 1])] -= word.count;
      size_t out = 0;
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          s[out++] = merged;
          i += 2;
        } else {
          s[out++] = s[i++];
        }
      }
      s.resize(out);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t key = PairKey(s[i], s[i + 1]);
        delta[key] += word.count;
        // Only pairs with the new id are new to this word; the rest are indexed.
        if (s[i] == merged || s[i + 1] == merged) where_[key].push_back(w);
      }
    }
    for (const auto& [key, d] : delta) {
      if (d == 0) continue;
      const int64_t now = counts_[key] += d;
      if (now > 0) {
        heap_.push({now, key});
      } else {
        counts_.erase(key);
      }
    }
  }

 private:
  std::vector<Word> words_;
  absl::flat_hash_map<uint64_t, int64_t> counts_;               // pair -> occurrences
  absl::flat_hash_map<uint64_t, std::vector<int32_t>> where_;   // pair -> words (may be stale)
  std::priority_queue<Candidate> heap_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> TrainBpe(
    absl::Span<const absl::string_view> documents, const BpeTrainOptions& options) {
  const int64_t min_vocab = BpeTokenizer::kNumByteTokens + 1;
  const int64_t max_vocab = min_vocab + BpeTokenizer::kMaxMerges;
  if (options.vocab_size < min_vocab || options.vocab_size > max_vocab) {
    return InvalidArgument(absl::StrCat("BPE vocab size ", options.vocab_size),
                           absl::StrCat("a size in [", min_vocab, ", ", max_vocab,
                                        "] (256 bytes + merges + end-of-text)"));
  }
  absl::flat_hash_map<absl::string_view, int64_t> chunk_counts;
  size_t total_bytes = 0;
  for (absl::string_view doc : documents) {
    total_bytes += doc.size();
    ForEachChunk(doc, [&](absl::string_view chunk) { ++chunk_counts[chunk]; });
  }
  if (total_bytes == 0) {
    return InvalidArgument("empty corpus for BPE training", "at least one byte of text",
                           "check that the input files are not empty");
  }
  std::vector<Word> words;
  words.reserve(chunk_counts.size());
  for (const auto& [chunk, count] : chunk_counts) {
    if (chunk.size() < 2) continue;  // nothing to merge inside
    Word w;
    w.symbols.assign(reinterpret_cast<const uint8_t*>(chunk.data()),
                     reinterpret_cast<const uint8_t*>(chunk.data()) + chunk.size());
    w.count = count;
    words.push_back(std::move(w));
  }
  Trainer trainer(std::move(words));
  const int64_t wanted = options.vocab_size - min_vocab;
  std::vector<BpeMerge> merges;
  merges.reserve(wanted);
  for (int64_t r = 0; r < wanted; ++r) {
    uint64_t pair;
    if (!trainer.Best(&pair)) {
      return InvalidArgument(
          absl::StrCat("the corpus (", total_bytes, " bytes) supports only ", r,
                       " BPE merges, fewer than the ", wanted, " a vocabulary of ",
                       options.vocab_size, " needs"),
          absl::StrCat("vocab_size <= ", min_vocab + r), "use a larger corpus or a smaller vocabulary");
    }
    merges.push_back({static_cast<int32_t>(pair >> 32), static_cast<int32_t>(pair & 0xFFFFFFFFu)});
    trainer.Merge(pair, BpeTokenizer::kNumByteTokens + static_cast<int32_t>(r), r);
    if (options.progress && (r % 64 == 0 || r + 1 == wanted)) options.progress(r + 1, wanted);
  }
  return BpeTokenizer::FromMerges(std::move(merges));
}

}  // namespace weft::data
