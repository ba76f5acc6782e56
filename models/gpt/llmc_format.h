// Interop with Karpathy's llm.c GPT-2 model files (gpt2_124M.bin, written
// by train_gpt2.py and train_gpt2.cu):
//
//   int32[256] header: [0] 20240326 magic, [1] version (3: fp32, 5: bf16),
//                      [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp
//   16 tensors back to back, each stacking all L layers where per-layer:
//     wte (Vp, C)  wpe (maxT, C)  ln1w ln1b (L, C)  qkvw (L, 3C, C)  qkvb (L, 3C)
//     attprojw (L, C, C)  attprojb (L, C)  ln2w ln2b (L, C)  fcw (L, 4C, C)
//     fcb (L, 4C)  fcprojw (L, C, 4C)  fcprojb (L, C)  lnfw lnfb (C)
//
// weft's GPT uses the same math and layouts (Linear weights are (out, in);
// qkv rows are [q; k; v] with heads contiguous inside each; the head is
// tied to wte), so the mapping is a renaming plus per-layer slicing:
//   wte -> embed.wte, wpe -> embed.wpe, ln1w -> blocks.{l}.ln1.weight,
//   qkvw -> blocks.{l}.attn.qkv.weight, attprojw -> blocks.{l}.attn.proj.weight,
//   fcw -> blocks.{l}.mlp.fc.weight, fcprojw -> blocks.{l}.mlp.proj.weight,
//   lnfw -> ln_f.weight (and the matching biases).
// Vocabulary padding: llm.c pads wte to Vp rows and weft to its
// vocab_pad_multiple; rows [0, V) carry over and the padding rows are zero
// on both sides (they never reach the loss).
#ifndef WEFT_MODELS_GPT_LLMC_FORMAT_H_
#define WEFT_MODELS_GPT_LLMC_FORMAT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_weights.h"

namespace weft {

// The model an llm.c file describes, from its header alone: n_layer, n_head,
// d_model, vocab_size = V, max_seq_len = maxT, tied weights, mlp_ratio 4,
// and the largest vocab_pad_multiple (power of two up to 128) that pads V to
// Vp, or Vp itself when none does.
absl::StatusOr<GptConfig> LlmcConfig(const std::string& path);

// Reads an fp32 or bf16 llm.c file into weft's names and shapes for a model
// built from `config`. The file must match its n_layer, n_head, d_model and
// vocab_size, and hold at least max_seq_len positions (extra ones are
// dropped); every difference is listed with the flag that fixes it.
absl::StatusOr<GptWeights> ReadLlmcCheckpoint(const std::string& path, const GptConfig& config);

// Writes version 3 (fp32), or with `bf16` version 5 (bf16, rounded to
// nearest even, as llm.c's train_gpt2.cu loads it), with Vp = weft's padded
// vocabulary (padding rows zeroed) and maxT = max_seq_len. `weights` must
// hold exactly the tied model's parameters (see ExportWeights); untied
// models are refused since llm.c has no separate lm_head. Atomic:
// temporary file, fsync, rename.
absl::Status WriteLlmcCheckpoint(const std::string& path, const GptConfig& config,
                                 const GptWeights& weights, bool bf16 = false);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_LLMC_FORMAT_H_
