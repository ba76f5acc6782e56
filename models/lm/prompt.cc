#include "models/lm/prompt.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {

absl::StatusOr<std::vector<int32_t>> PromptTokens(const data::Tokenizer& tokenizer,
                                                  const std::string& prompt,
                                                  absl::string_view flag) {
  if (!prompt.empty()) return tokenizer.Encode(prompt);
  if (tokenizer.eot_id() < 0) {
    return InvalidArgument(
        absl::StrCat("an empty --", flag, " with a tokenizer that has no end-of-text token"),
        "a prompt to continue", absl::StrCat("e.g. --", flag, "=\"The \""));
  }
  return std::vector<int32_t>{tokenizer.eot_id()};
}

}  // namespace weft
