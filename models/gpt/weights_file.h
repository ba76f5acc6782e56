// Weights a GPT starts from (train --init_from) or samples (sample
// --init_from): an llm.c model file (llmc_format.h) or a safetensors file in
// weft's parameter names and shapes, as `//tools:ckpt export
// --format=safetensors` writes it, or any program that writes those names
// (PyTorch's safetensors package, or tests/torch_reference.py by hand).
// Which one is told by the contents: safetensors starts with an 8-byte
// header length and then the JSON header's '{'; anything else is llm.c's.
#ifndef WEFT_MODELS_GPT_WEIGHTS_FILE_H_
#define WEFT_MODELS_GPT_WEIGHTS_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_weights.h"

namespace weft {

bool IsSafetensorsFile(const std::string& path);

// What parameter shapes do not show: n_head, vocab_size (within the padded
// rows), top_k, tie_weights. OK when `recorded` (the model a file or a
// checkpoint `what` was trained as) agrees with `model`; else every
// difference with the flag that fixes it.
absl::Status CheckSameArchitecture(const GptConfig& recorded, const GptConfig& model,
                                   const std::string& what);

// The weights in `path` for a job whose model is `model`. A Hugging Face
// GPT2LMHeadModel directory gives its tensors renamed (hf_gpt2.h; `model`
// is then its config.json's). An llm.c file
// must match it (ReadLlmcCheckpoint). A safetensors file gives its
// parameters (a consolidated file's optimizer state, "<param>:<kind>", is
// left out: the optimizer starts fresh); when it records the job it was
// trained in (weft's exports do), that model must pass
// CheckSameArchitecture. Names and shapes are checked when the trainer
// loads them. `tokenizer`, when given, gets the tokenizer the file carries
// ("" if none): the caller compares it with its data's. `records_model`,
// when given, says whether the file fixes what shapes do not show (false
// for a safetensors file without weft's record: n_head then comes from the
// flags unchecked, which the caller should say).
absl::StatusOr<GptWeights> ReadInitWeights(const std::string& path, const GptConfig& model,
                                           std::string* tokenizer = nullptr,
                                           bool* records_model = nullptr);

// A weights file with the model it holds, for sampling: llm.c's header, a
// Hugging Face directory's config.json, or the job a safetensors export
// records (one without a record is an error:
// n_head cannot be read from shapes).
struct WeightsFile {
  GptConfig model;
  GptWeights weights;
  int64_t seq_len = 0;    // the recorded job's, else the model's max_seq_len
  std::string tokenizer;  // serialized; empty when the file carries none
};
absl::StatusOr<WeightsFile> ReadWeightsFile(const std::string& path);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_WEIGHTS_FILE_H_
