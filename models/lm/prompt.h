// The tokens a sample continues, shared by //models/gpt:sample and
// sampling during training (--sample_every).
#ifndef WEFT_MODELS_LM_PROMPT_H_
#define WEFT_MODELS_LM_PROMPT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/tokenizer.h"

namespace weft {

// `prompt` encoded, or for an empty prompt the end-of-text token (an error
// naming `flag` when the tokenizer has none).
absl::StatusOr<std::vector<int32_t>> PromptTokens(const data::Tokenizer& tokenizer,
                                                  const std::string& prompt,
                                                  absl::string_view flag);

}  // namespace weft

#endif  // WEFT_MODELS_LM_PROMPT_H_
