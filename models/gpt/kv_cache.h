// Incremental GPT forward for sampling: each layer keeps the keys and
// values of the tokens it has seen, so a new token costs one position's
// forward (its q, k, v, attention over the cache, MLP and the head at that
// position only) instead of the whole window's.
//
// Positions are absolute (learned position table), so a cache is valid
// only while its tokens start at position 0: once a window slides past
// seq_len every position moves (Generate then runs the window through
// Forward; Clear() starts a cache over).
// The math is the model's own (the same modules and kernels, attention
// through the blockwise kernel with explicit positions); logits agree with
// a full Forward to rounding, not bitwise (different kernel shapes).
#ifndef WEFT_MODELS_GPT_KV_CACHE_H_
#define WEFT_MODELS_GPT_KV_CACHE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/nn/layer_norm.h"
#include "core/nn/run_context.h"
#include "models/gpt/gpt.h"

namespace weft {

class GptKvCache {
 public:
  // A cache for up to `capacity` positions (<= the model's max_seq_len) on
  // ctx's device in its compute dtype. Needs the model as Gpt builds it:
  // strategies that swap modules (tp, cp) are not supported. The model
  // must outlive the cache.
  static absl::StatusOr<GptKvCache> Create(Gpt& model, const RunContext& ctx, int64_t capacity);

  // Runs `tokens` at positions [size(), size() + n), keeps their keys and
  // values, and returns the logits (1, padded vocab) of the last one.
  absl::StatusOr<Tensor> Append(RunContext ctx, absl::Span<const int32_t> tokens);

  // Forget every token: the next Append starts at position 0.
  void Clear() { size_ = 0; }
  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }

 private:
  struct Layer {
    Module* ln1;
    Module* qkv;
    Module* proj;
    Module* dropout;
    LayerNorm* ln2;
    Module* mlp;
    int heads;
    // (capacity, 3C): each position's whole qkv row, so appending is one
    // contiguous copy and the attention kernel reads k and v at their
    // packed columns.
    Tensor rows;
  };
  GptKvCache(Gpt* model, std::vector<Layer> layers, int64_t capacity)
      : model_(model), layers_(std::move(layers)), capacity_(capacity) {}

  Gpt* model_;
  std::vector<Layer> layers_;
  int64_t capacity_;
  int64_t size_ = 0;
};

}  // namespace weft

#endif  // WEFT_MODELS_GPT_KV_CACHE_H_
