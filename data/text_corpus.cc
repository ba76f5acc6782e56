#include "data/text_corpus.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/file_util.h"
#include "data/pretokenizer.h"

namespace weft::data {
namespace {
// Big enough that per-block costs (the BPE chunk cache restarts) vanish,
// small enough for a smooth progress bar.
constexpr size_t kEncodeBlockBytes = 4 << 20;
}  // namespace

absl::StatusOr<std::vector<TextDocument>> ReadTextDocuments(
    const std::vector<std::string>& paths) {
  if (paths.empty()) {
    return InvalidArgument("no input text files", "at least one file", "pass --input=a.txt,b.txt");
  }
  std::vector<TextDocument> docs;
  size_t total = 0;
  for (const std::string& path : paths) {
    WEFT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    total += text.size();
    docs.push_back({path, std::move(text)});
  }
  if (total == 0) {
    return InvalidArgument(absl::StrCat("empty corpus: ", paths.size(), " input file(s) starting ",
                                        "with '", paths[0], "' hold no text"),
                           "at least one non-empty text file");
  }
  return docs;
}

absl::StatusOr<TrainValSplit> SplitTrainVal(absl::Span<const TextDocument> documents,
                                            double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    return InvalidArgument(absl::StrCat("validation fraction ", val_fraction),
                           "a fraction in [0, 1)");
  }
  TrainValSplit split;
  for (const TextDocument& doc : documents) {
    const absl::string_view text = doc.text;
    const size_t target = static_cast<size_t>(
        std::floor(static_cast<double>(text.size()) * (1.0 - val_fraction)));
    size_t cut = val_fraction == 0.0 ? text.size() : SafeSplitPoint(text, target);
    if (val_fraction > 0.0 && target < text.size() && cut > target + (text.size() - target) / 2) {
      // No whitespace soon after the target (CJK, or text without spaces;
      // a final newline is the only split point): cut there anyway, at a
      // character boundary, rather than give up most of the validation
      // split. Only the two halves' first and last chunks change.
      cut = target;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    }
    if (cut > 0) split.train.push_back(text.substr(0, cut));
    if (cut < text.size()) split.val.push_back(text.substr(cut));
  }
  return split;
}

absl::Status EncodeDocuments(const Tokenizer& tokenizer,
                             absl::Span<const absl::string_view> documents,
                             std::vector<int32_t>* ids,
                             const std::function<void(int64_t, int64_t)>& progress) {
  int64_t total = 0;
  for (absl::string_view doc : documents) total += static_cast<int64_t>(doc.size());
  int64_t done = 0;
  for (size_t d = 0; d < documents.size(); ++d) {
    const absl::string_view doc = documents[d];
    if (tokenizer.eot_id() >= 0) ids->push_back(tokenizer.eot_id());
    size_t pos = 0;
    while (pos < doc.size()) {
      const size_t end = SafeSplitPoint(doc, pos + kEncodeBlockBytes);
      absl::Status s = tokenizer.EncodeAppend(doc.substr(pos, end - pos), ids);
      if (!s.ok()) {
        return Annotate(s, absl::StrCat("encoding document ", d, " (block at byte ", pos, ")"));
      }
      done += static_cast<int64_t>(end - pos);
      pos = end;
      if (progress) progress(done, total);
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::data
