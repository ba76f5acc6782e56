// Incremental forward of a decoder-only language model (core/nn/causal_lm.h)
// for sampling: each attention layer keeps the packed q|k|v rows of the
// tokens it has seen, so a new token costs one position's forward instead
// of the whole window's. Any CausalLm works, GPT's or Llama's: the cache
// swaps each attention core (core/nn/attention_core.h) for one that, inside
// Append, appends its rows and attends over them (elsewhere it is the old
// core: a full Forward still works while the cache lives); Append runs the
// model's own Forward at the new tokens' positions (RunContext::sequence:
// learned position rows and rotary angles both read it). The cores go back
// when the cache is destroyed.
//
// A cache is valid while its tokens start at position 0; once a window
// slides past seq_len every position moves (Generate then runs the window
// through Forward; Clear() starts a cache over). Logits agree with a full
// Forward to rounding, not bitwise (the blockwise attention kernel).
#ifndef WEFT_MODELS_LM_KV_CACHE_H_
#define WEFT_MODELS_LM_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/nn/causal_lm.h"
#include "core/nn/run_context.h"

namespace weft {

class KvCache {
 public:
  // A cache for up to `capacity` positions on ctx's device in its compute
  // dtype. Needs the model as built: every block's attention through an
  // attention core and a whole token embedding (strategies that swap them,
  // tp and cp, are refused). The model must outlive the cache.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(CausalLm& model, const RunContext& ctx,
                                                         int64_t capacity);
  ~KvCache();  // the model's own attention cores go back in
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Runs `tokens` at positions [size(), size() + n), keeps their rows, and
  // returns the logits (1, padded vocab) of the last one.
  absl::StatusOr<Tensor> Append(RunContext ctx, absl::Span<const int32_t> tokens);

  // Forget every token: the next Append starts at position 0.
  void Clear() { size_ = 0; }
  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }

 private:
  struct Site {
    Module* parent;
    std::string name;
    std::unique_ptr<Module> original;  // the core, while the cache stands in
  };
  KvCache(CausalLm* model, int64_t capacity) : model_(model), capacity_(capacity) {}

  CausalLm* model_;
  std::vector<Site> sites_;
  const int64_t capacity_;
  int64_t size_ = 0;
  bool appending_ = false;  // read by the swapped-in cores
};

}  // namespace weft

#endif  // WEFT_MODELS_LM_KV_CACHE_H_
