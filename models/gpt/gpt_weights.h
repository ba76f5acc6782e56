// GptWeights: a model's full parameters by name as host f32 tensors, the
// exchange currency of weight-file formats (llm.c, safetensors) and of
// Trainer::LoadWeights. Copies to and from a materialized model whose
// parameters are whole (not sharded); a sharded job loads through the
// trainer instead.
#ifndef WEFT_MODELS_GPT_GPT_WEIGHTS_H_
#define WEFT_MODELS_GPT_GPT_WEIGHTS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/host_tensor.h"
#include "core/nn/module.h"

namespace weft {

// Parameter name ("blocks.0.attn.qkv.weight") -> row-major f32 values in
// the parameter's global shape.
using GptWeights = std::map<std::string, ckpt::HostTensor>;

// Every parameter of `model` (owned, not borrowed: a tied head adds nothing),
// copied to the host as f32.
absl::StatusOr<GptWeights> ExportWeights(Module& model);

// Gives each tensor stored in an equivalent layout (SameRowMajorLayout: a
// tensor-parallel checkpoint's packed qkv (3, C, C) for the model's
// (3C, C)) its parameter's shape in `model`; the values stay. Other tensors
// are left as they are (ImportWeights then names any that do not fit).
void ToModelShapes(Module& model, GptWeights* weights);

// Copies `weights` into `model`'s parameter values (converting to their
// dtype and device). The names must match exactly, with equal shapes; on
// error the model is left unchanged.
absl::Status ImportWeights(const GptWeights& weights, Module& model);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_GPT_WEIGHTS_H_
