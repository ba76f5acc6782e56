// Shared by gpt2_tokenizer.cc (weft's form, encoding) and
// gpt2_tokenizer_hf.cc (the Hugging Face and OpenAI files).
#ifndef WEFT_DATA_GPT2_TOKENIZER_INTERNAL_H_
#define WEFT_DATA_GPT2_TOKENIZER_INTERNAL_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace weft::data::gpt2_internal {

// `file` is not a vocabulary Gpt2Tokenizer reads: `what` is why.
absl::Status Bad(absl::string_view file, absl::string_view what);

}  // namespace weft::data::gpt2_internal

#endif  // WEFT_DATA_GPT2_TOKENIZER_INTERNAL_H_
