// GptWeights: a model's full parameters by name as host f32 tensors, the
// exchange currency of weight-file formats (llm.c, safetensors). Copies to
// and from a materialized model whose parameters are whole (not sharded).
#ifndef WEFT_MODELS_GPT_GPT_WEIGHTS_H_
#define WEFT_MODELS_GPT_GPT_WEIGHTS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/module.h"
#include "core/tensor/tensor.h"

namespace weft {

// Parameter name ("blocks.0.attn.qkv.weight") -> contiguous f32 CPU tensor
// in the parameter's global shape.
using GptWeights = std::map<std::string, Tensor>;

// Every parameter of `model` (owned, not borrowed: a tied head adds nothing),
// copied to the host as f32.
absl::StatusOr<GptWeights> ExportWeights(Module& model);

// Copies `weights` into `model`'s parameter values (converting to their
// dtype and device). The names must match exactly, with equal shapes.
absl::Status ImportWeights(const GptWeights& weights, Module& model);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_GPT_WEIGHTS_H_
