#include "models/lm/text_lm_job.h"

#include <cstdio>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/base/user_path.h"
#include "data/tokenizer_factory.h"

namespace weft {
namespace {

// A real English corpus every Debian machine can get (package `fortunes`,
// installed by tools/setup.sh): about 1 MB of quotations and verse.
constexpr const char* kFortunesDir = "/usr/share/games/fortunes/";
constexpr const char* kDefaultCorpus[] = {"literature", "wisdom", "science", "people",
                                          "computers",  "humorists", "art", "songs-poems"};

}  // namespace

absl::StatusOr<std::string> LmDataPath(const TrainConfig& train) {
  const std::string& given = train.data().data();
  if (!given.empty()) {
    std::vector<std::string> parts;
    for (absl::string_view p : absl::StrSplit(given, ',')) {
      parts.push_back(ResolveUserPath(std::string(p)));
    }
    return absl::StrJoin(parts, ",");
  }
  std::vector<std::string> files;
  for (const char* f : kDefaultCorpus) files.push_back(absl::StrCat(kFortunesDir, f));
  if (FILE* probe = std::fopen(files[0].c_str(), "r")) {
    std::fclose(probe);
  } else {
    return NotFound(absl::StrCat("default corpus ", files[0], " is missing"),
                    "Debian's fortunes package",
                    "run tools/setup.sh, or pass --data=PATH to any text file");
  }
  return absl::StrJoin(files, ",");
}

absl::StatusOr<DataLoaders> TextLmJob::OpenData(const data::DataLoader::Options& base) {
  data::TextDataOptions t;
  t.path = data_path_;
  // A tokenizer file is a user path like --data (bazel run starts in the
  // runfiles tree); a spec (char, bpe:N) is not a path.
  const std::string& tokenizer = train_.data().tokenizer();
  if (data::IsTokenizerSpec(tokenizer)) {
    t.tokenizer = tokenizer;
  } else if (absl::StartsWith(tokenizer, "hf:")) {  // a Hugging Face file or directory
    t.tokenizer = absl::StrCat("hf:", ResolveUserPath(tokenizer.substr(3)));
  } else {
    t.tokenizer = ResolveUserPath(tokenizer);
  }
  t.val_fraction = train_.data().val_fraction();
  t.seq_len = train_.seq_len();
  t.vocab_size = vocab_size_;
  t.loader = base;
  t.cache = text_cache_;
  WEFT_ASSIGN_OR_RETURN(data::TextData d, data::OpenTextData(t));
  return DataLoaders{std::move(d.train), std::move(d.val), d.vocab_size,
                     d.tokenizer != nullptr ? d.tokenizer->Serialize() : std::string()};
}

}  // namespace weft
