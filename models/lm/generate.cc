#include "models/lm/generate.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/philox.h"
#include "models/lm/kv_cache.h"

namespace weft {

absl::Status CheckGenerateOptions(const GenerateOptions& options, absl::string_view flag_prefix) {
  if (!std::isfinite(options.temperature) || options.temperature < 0) {
    return InvalidArgument(absl::StrCat(flag_prefix, "temperature=", options.temperature),
                           "a finite number >= 0", "0 takes the most likely token");
  }
  if (options.top_k < 0) {
    return InvalidArgument(absl::StrCat(flag_prefix, "top_k=", options.top_k), ">= 0",
                           "0 draws from the whole vocabulary");
  }
  if (options.max_new_tokens < 0) {
    return InvalidArgument(absl::StrCat(flag_prefix, "tokens=", options.max_new_tokens), ">= 0");
  }
  return absl::OkStatus();
}

int32_t PickToken(absl::Span<const float> logits, const GenerateOptions& options, double u) {
  const int64_t n = static_cast<int64_t>(logits.size());
  if (options.temperature <= 0.f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Candidates by descending logit (ties: lower id first), cut to top_k.
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = options.top_k > 0 ? std::min<int64_t>(options.top_k, n) : n;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  order.resize(k);
  // Softmax in double, shifted by the largest logit.
  std::vector<double> weight(k);
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    weight[i] = std::exp((static_cast<double>(logits[order[i]]) - logits[order[0]]) /
                         options.temperature);
    total += weight[i];
  }
  double at = u * total;
  for (int64_t i = 0; i < k; ++i) {
    if (at < weight[i]) return order[i];
    at -= weight[i];
  }
  return order[k - 1];  // u * total rounded past the last weight
}

absl::Status Generate(CausalLm& model, int64_t seq_len, RunContext ctx, const GenerateOptions& options,
                      std::vector<int32_t>* tokens, const std::function<void(int32_t)>& on_token) {
  WEFT_RETURN_IF_ERROR(CheckGenerateOptions(options));
  if (tokens->empty()) {
    return InvalidArgument("an empty prompt", "at least one token to continue",
                           "give a prompt, or start from the tokenizer's end-of-text token");
  }
  const int64_t model_vocab = model.lm_shape().vocab_size;
  const int64_t vocab =
      options.vocab > 0 ? std::min<int64_t>(options.vocab, model_vocab) : model_vocab;
  for (int32_t t : *tokens) {
    if (t < 0 || t >= vocab) {
      return InvalidArgument(absl::StrCat("prompt token ", t),
                             absl::StrCat("ids in [0, ", vocab, ") of the model's vocabulary"));
    }
  }
  ctx.training = false;
  std::unique_ptr<KvCache> cache;
  if (options.kv_cache) {
    WEFT_ASSIGN_OR_RETURN(cache, KvCache::Create(model, ctx, seq_len));
  }
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int64_t size = static_cast<int64_t>(tokens->size());
    const int64_t t = std::min<int64_t>(seq_len, size);
    const int64_t start = size - t;
    Tensor logits;  // (1, padded vocab): the window's last position
    if (cache != nullptr && start == 0) {
      // The text still fits the window: run only what the cache lacks (the
      // prompt at first, then the newest token).
      const int64_t have = cache->size();
      WEFT_ASSIGN_OR_RETURN(
          logits, cache->Append(ctx, absl::MakeConstSpan(tokens->data() + have, size - have)));
    } else {
      // Without the cache, or once the window slides: every position moves,
      // so the cache cannot be extended and the whole window runs (through
      // Forward, whose attention is faster over a full window than the
      // cache's blockwise kernel).
      WEFT_ASSIGN_OR_RETURN(
          Tensor window,
          Tensor::FromVector<int32_t>(absl::MakeConstSpan(tokens->data() + start, t), {1, t}));
      WEFT_ASSIGN_OR_RETURN(window, window.To(ctx.device, ctx.stream));
      WEFT_ASSIGN_OR_RETURN(Tensor all, model.Forward(ctx, window));  // (t, padded vocab)
      logits = all.Slice(0, t - 1, t);
    }
    WEFT_ASSIGN_OR_RETURN(std::vector<float> last, logits.Slice(1, 0, vocab).ToFloats());
    const double u = PhiloxUniform(options.seed, static_cast<uint64_t>(i));
    const int32_t next = PickToken(last, options, u);
    tokens->push_back(next);
    if (on_token) on_token(next);
    if (next == options.stop_id) break;
  }
  return absl::OkStatus();
}

}  // namespace weft
