// Test fixture: a tiny Llama (4 query heads over 2 K/V heads, RoPE, SwiGLU)
// that the GPT harnesses (tests/parity.h, tests/estimate_rank.h) train in
// place of the job's GPT, over the same data and train config.
#ifndef WEFT_TESTS_TINY_LLAMA_H_
#define WEFT_TESTS_TINY_LLAMA_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/runtime/trainer.h"
#include "models/llama/llama_config.pb.h"

namespace weft::testing {

// 2 layers, 32 wide, SwiGLU 48, max_seq_len 16, untied unless `tied`.
LlamaConfig TinyLlamaConfig(bool tied = false, bool qk_norm = false);

// The mixture-of-experts variants of TinyLlamaConfig: 4 SwiGLU experts of
// 32, top-2 renormalised, balance and z-losses on ("mixtral"); sigmoid
// scores with a shared expert of 24 ("sigmoid_shared"); 8 experts, top-4
// with raw gates and QK-norm ("qwen3").
LlamaConfig TinyLlamaMoeConfig(const std::string& variant = "mixtral");

// A model factory (FunctionJob::MakeModelFn) building `config` at `seq_len` with the data's vocabulary.
std::function<absl::StatusOr<std::unique_ptr<Model>>(const DataLoaders&)> LlamaModelFactory(
    const LlamaConfig& config, int64_t seq_len);

}  // namespace weft::testing

#endif  // WEFT_TESTS_TINY_LLAMA_H_
