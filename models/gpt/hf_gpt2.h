// Hugging Face GPT2LMHeadModel checkpoints read as they are (a directory
// with config.json and model.safetensors, as save_pretrained writes it:
// openai-community/gpt2 and its fine-tunes). The shape comes from
// config.json; the tensors are renamed to weft's (transformer.h.N.attn.c_attn
// -> blocks.N.attn.qkv, ...), GPT-2's Conv1D weights (in, out) transposed to
// weft's (out, in), the embedding padded with zero rows to the padded
// vocabulary, and the position table cut to max_seq_len. The head is tied
// to the embedding, as in GPT-2.
#ifndef WEFT_MODELS_GPT_HF_GPT2_H_
#define WEFT_MODELS_GPT_HF_GPT2_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_weights.h"
#include "models/lm/hf_files.h"  // IsHfCheckpoint

namespace weft {

// The model config.json describes, keeping `base`'s vocab_pad_multiple,
// dropout and init_std (and max_seq_len when set: at most n_positions). A
// field `base` sets that contradicts config.json is an error naming both;
// another architecture, activation or an unscaled attention is refused.
absl::StatusOr<GptConfig> ReadHfGpt2Config(const std::string& dir, const GptConfig& base);

// Every tensor of the checkpoint under weft's names and shapes for
// `config` (ReadHfGpt2Config's).
absl::StatusOr<GptWeights> ReadHfGpt2Weights(const std::string& dir, const GptConfig& config);

// The other way: a GPT's weights (weft's names, the model's shapes) as a
// GPT2LMHeadModel directory's config.json and tensors, stored as `dtype`
// ("F32", "BF16", "F16"). A model GPT-2 has no form for (experts, an
// untied head) is refused.
absl::StatusOr<HfExport> ToHfGpt2(const GptConfig& config, const GptWeights& weights,
                                  const std::string& dtype);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_HF_GPT2_H_
