// Sampling text from a decoder-only language model (GPT, Llama): one token at a time, each drawn from the
// model's next-token distribution at the last position of the most recent
// seq_len tokens (the window it was trained on). With the key/value cache
// (kv_cache.h, the default) a token costs one position's forward while the
// text fits the window; once it is longer, the window slides, positions
// shift, and each token runs the whole window forward again, as it does
// without the cache.
#ifndef WEFT_MODELS_LM_GENERATE_H_
#define WEFT_MODELS_LM_GENERATE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/nn/run_context.h"
#include "core/nn/causal_lm.h"

namespace weft {

struct GenerateOptions {
  int64_t max_new_tokens = 200;
  // Logits are divided by it before the softmax; 0 picks the most likely
  // token (the lowest id among equals).
  float temperature = 1.0f;
  // Draw among the k most likely tokens only (0: all of them).
  int top_k = 0;
  // The draws: token i of a run uses Philox(seed, i), so a seed repeats a
  // sample exactly on any device.
  uint64_t seed = 0;
  // Stop after emitting this token (the end-of-text id); -1: never.
  int32_t stop_id = -1;
  // Draw among ids below this (a tokenizer smaller than the model's
  // vocabulary cannot decode the rest); 0: the model's vocab_size.
  int64_t vocab = 0;
  // Keep each layer's keys and values between tokens (KvCache). Off:
  // every token runs the whole window through model.Forward.
  bool kv_cache = true;
};

// An error for a temperature that is negative or not finite (NaN drew
// degenerate text, a negative one acted greedy), a negative top_k or a
// negative max_new_tokens. Messages name them as `flag_prefix` + "temperature"
// ("--" for the sample targets' flags); "tokens" for max_new_tokens.
absl::Status CheckGenerateOptions(const GenerateOptions& options,
                                  absl::string_view flag_prefix = "");

// The next token from the logits of one position (the real vocabulary
// only, without padding), drawn with uniform `u` in [0, 1).
int32_t PickToken(absl::Span<const float> logits, const GenerateOptions& options, double u);

// Appends up to max_new_tokens tokens to `tokens` (the prompt: at least one
// token; the options as CheckGenerateOptions wants them), calling on_token (may be empty) after each. `ctx` must be the
// model's device and compute dtype; it runs in evaluation mode (no dropout,
// nothing saved for backward).
absl::Status Generate(CausalLm& model, int64_t seq_len, RunContext ctx, const GenerateOptions& options,
                      std::vector<int32_t>* tokens,
                      const std::function<void(int32_t)>& on_token = {});

}  // namespace weft

#endif  // WEFT_MODELS_LM_GENERATE_H_
