// Trains a byte-level BPE vocabulary (bpe_tokenizer.h) on a corpus.
//
// The corpus is pre-tokenized into chunks and each distinct chunk is counted
// once, so training costs grow with the number of distinct words rather than
// the corpus size. Each step merges the most frequent adjacent pair; ties go
// to the smaller (left, right) ids, so the result depends only on the corpus
// and the vocabulary size, never on hash order or thread timing. Pair counts
// are updated incrementally: a merge touches only the words that contain it.
#ifndef WEFT_DATA_BPE_TRAINER_H_
#define WEFT_DATA_BPE_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/bpe_tokenizer.h"

namespace weft::data {

struct BpeTrainOptions {
  // Total vocabulary: 256 byte ids + merges + 1 end-of-text id, so at least 257.
  int64_t vocab_size = 4096;
  // Called now and then with (merges done, merges wanted); may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

// Learns vocab_size - 257 merges from `documents` (merges never cross
// document boundaries). Fails on an empty corpus and when the corpus has
// fewer distinct pairs than the vocabulary needs, saying how many it has.
absl::StatusOr<std::unique_ptr<BpeTokenizer>> TrainBpe(
    absl::Span<const absl::string_view> documents, const BpeTrainOptions& options);

inline absl::StatusOr<std::unique_ptr<BpeTokenizer>> TrainBpe(absl::string_view corpus,
                                                              const BpeTrainOptions& options) {
  return TrainBpe(absl::MakeConstSpan(&corpus, 1), options);
}

}  // namespace weft::data

#endif  // WEFT_DATA_BPE_TRAINER_H_
