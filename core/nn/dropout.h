// Dropout (inverted). Masks come from Philox keyed by the step's dropout
// seed and this module's name, and indexed by the element's position in the
// GLOBAL tensor, so forward, backward and recompute agree without storing a
// mask, masks do not depend on the device, and a rank holding a piece of the
// tensor draws exactly that piece of the single-process mask.
//
// Random streams: a region is either replicated across the tensor-parallel
// ranks (every rank holds the whole tensor and must drop the same
// elements) or sharded over them (each rank holds a box of it). The two
// kinds draw from separate streams, so sharding one region never shifts
// the masks of another; a strategy that shards a region calls SetShard
// with the local box, and the same module unsharded (one process) draws
// the same numbers for the same elements.
//
// Pieces of the sequence: the input's rows along the sequence dimension
// (1, the T of (B, T, ...)) may be a block of the rank's tokens
// (SetBlockAlong: sequence parallelism), and the rank's tokens may be
// chunks of the whole sequence (RunContext::sequence: context
// parallelism, zigzag). Both map to runs of global rows (SequenceRows),
// the block inside the chunks when both apply, so each rank draws exactly
// its rows of the single-process mask.
// Identity when p == 0 or when evaluating.
#ifndef WEFT_CORE_NN_DROPOUT_H_
#define WEFT_CORE_NN_DROPOUT_H_

#include <optional>
#include <vector>

#include "core/kernels/token_chunks.h"
#include "core/nn/module.h"
#include "core/nn/placement.h"

namespace weft {

class Dropout : public Module {
 public:
  enum class Stream { kReplicated, kSharded };

  explicit Dropout(float p, Stream stream = Stream::kReplicated)
      : Module("Dropout"), p_(p), stream_(stream) {}

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  float p() const { return p_; }
  Stream stream() const { return stream_; }
  // This rank holds `box` of a `global`-shaped input (its shape must be the
  // box's). Marks the region sharded.
  void SetShard(Box box, Shape global);
  // Each input is block `index` of `count` equal blocks along `dim` of the
  // rank's tensor (a sequence shard, whose size is known only per call).
  // The stream stays the one the model declared: the masks are exactly
  // the single-process masks of the same elements.
  void SetBlockAlong(int dim, int index, int count);

  // The Philox key of this module's masks for the context's step seed.
  uint64_t Seed(const RunContext& ctx) const;

 private:
  absl::Status Apply(RunContext& ctx, Tensor& out, const Tensor& in, bool backward) const;

  const float p_;
  Stream stream_;
  std::optional<std::pair<Box, Shape>> shard_;
  struct Block {
    int dim, index, count;
  };
  std::optional<Block> block_;
};

// Calls fn(local_offset, global_offset, length) for each run of a box that
// is contiguous in both the local and the global row-major order.
void ForEachContiguousRun(const Box& box, const Shape& global,
                          const std::function<void(int64_t, int64_t, int64_t)>& fn);

// Where a tensor's rows along its sequence dimension sit in the global
// tensor: `runs` of (local row, global row, length), in local order, out of
// `global_rows` rows.
struct SequenceRows {
  struct Run {
    int64_t local, global, length;
    friend bool operator==(const Run&, const Run&) = default;
  };
  std::vector<Run> runs;
  int64_t global_rows = 0;
};

// The global rows of `rows` local rows that are block `index` of `count`
// equal blocks of the rank's tokens (count 1: all of them), when those
// tokens sit at `chunks`' global positions (nullopt: they are the whole
// sequence). An error names the sizes when the rows are not that block.
absl::StatusOr<SequenceRows> MapSequenceRows(int64_t rows, int index, int count,
                                             const std::optional<TokenChunks>& chunks);

// Calls fn(local_offset, global_offset, length) for each run of a tensor of
// `shape` whose rows along `dim` are `rows` of a tensor that is otherwise
// the same shape: one run per index of the dimensions before `dim`.
void ForEachSequenceRun(const Shape& shape, int dim, const SequenceRows& rows,
                        const std::function<void(int64_t, int64_t, int64_t)>& fn);

}  // namespace weft

#endif  // WEFT_CORE_NN_DROPOUT_H_
