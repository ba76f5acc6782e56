// Hugging Face checkpoints of the Llama family, read as they are: a
// directory with config.json and model.safetensors (or sharded
// model-0000N-of-0000M.safetensors with model.safetensors.index.json), as
// transformers' save_pretrained writes them, for LlamaForCausalLM and the
// same-shaped MistralForCausalLM and Qwen3ForCausalLM (QK-norm), and the
// mixtures of experts MixtralForCausalLM and Qwen3MoeForCausalLM (every
// layer sparse; per-expert tensors as on the Hub, or transformers 5's fused
// experts).
//
// The model's shape comes from config.json; the tensors are renamed to
// weft's (model.layers.N.self_attn.q_proj -> blocks.N.attn.q, ...), gate_proj
// and up_proj stacked into gate_up, and the embedding and head padded with
// zero rows to weft's padded vocabulary.
#ifndef WEFT_MODELS_LLAMA_HF_CHECKPOINT_H_
#define WEFT_MODELS_LLAMA_HF_CHECKPOINT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/host_tensor.h"
#include "models/llama/llama_config.pb.h"
#include "models/lm/hf_files.h"  // IsHfCheckpoint

namespace weft {

// The model config.json describes, with `base`'s vocab_pad_multiple. A
// field `base` sets (has_...) that contradicts config.json is an error
// naming both; an architecture or option weft does not build (attention
// biases, a sliding window shorter than max_seq_len, another rope_type)
// is refused.
absl::StatusOr<LlamaConfig> ReadHfLlamaConfig(const std::string& dir, const LlamaConfig& base);

// Every tensor of the checkpoint under weft's names and shapes for
// `config` (ReadHfLlamaConfig's).
absl::StatusOr<std::map<std::string, ckpt::HostTensor>> ReadHfLlamaWeights(
    const std::string& dir, const LlamaConfig& config);

// The other way: a Llama's weights (weft's names, the model's shapes) as
// the Hugging Face architecture of its shape: LlamaForCausalLM,
// Qwen3ForCausalLM (QK-norm), MixtralForCausalLM (experts) or
// Qwen3MoeForCausalLM (experts and QK-norm), stored as `dtype`. A model no
// architecture holds (sigmoid routing, a shared expert, capacity drops are
// training-only and dropped) is refused.
absl::StatusOr<HfExport> ToHfLlama(const LlamaConfig& config,
                                   const std::map<std::string, ckpt::HostTensor>& weights,
                                   const std::string& dtype);

}  // namespace weft

#endif  // WEFT_MODELS_LLAMA_HF_CHECKPOINT_H_
