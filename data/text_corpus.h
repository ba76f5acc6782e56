// Raw text corpora: reading text files as documents, splitting each document
// into a training head and a validation tail, and tokenizing documents into
// one id stream. Shared by //tools:prepare_data and OpenTextData (data.h),
// so a corpus tokenized either way gives the same ids.
#ifndef WEFT_DATA_TEXT_CORPUS_H_
#define WEFT_DATA_TEXT_CORPUS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "data/tokenizer.h"

namespace weft::data {

struct TextDocument {
  std::string name;  // the file path
  std::string text;
};

// Reads every file as one document. Fails naming a missing file, or when the
// files hold no text at all (an empty corpus).
absl::StatusOr<std::vector<TextDocument>> ReadTextDocuments(const std::vector<std::string>& paths);

struct TrainValSplit {
  std::vector<absl::string_view> train;  // views into the documents
  std::vector<absl::string_view> val;
};

// Each document's last ~val_fraction of bytes goes to validation. The cut is
// moved forward to a SafeSplitPoint (pretokenizer.h), so tokenizing the
// halves separately gives the ids of the whole. val_fraction is in [0, 1).
absl::StatusOr<TrainValSplit> SplitTrainVal(absl::Span<const TextDocument> documents,
                                            double val_fraction);

// Appends the ids of each document, each preceded by the tokenizer's
// end-of-text id when it has one (as llm.c prepares GPT-2 data). Long
// documents are encoded in blocks cut at SafeSplitPoints, which changes no
// ids; `progress(bytes_done, bytes_total)` is called after each block.
absl::Status EncodeDocuments(const Tokenizer& tokenizer,
                             absl::Span<const absl::string_view> documents,
                             std::vector<int32_t>* ids,
                             const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace weft::data

#endif  // WEFT_DATA_TEXT_CORPUS_H_
