#include "core/nn/dropout.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

// Sharded regions draw from their own stream.
constexpr uint64_t kShardedStreamKey = 0x5348415244454421ull;

uint64_t Dropout::Seed(const RunContext& ctx) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the module path
  for (unsigned char c : name()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return ctx.dropout_seed ^ h ^ (stream_ == Stream::kSharded ? kShardedStreamKey : 0);
}

void Dropout::SetShard(Box box, Shape global) {
  stream_ = Stream::kSharded;
  shard_.emplace(std::move(box), std::move(global));
}

void Dropout::SetBlockAlong(int dim, int index, int count) {
  block_ = Block{dim, index, count};
}

void ForEachContiguousRun(const Box& box, const Shape& global,
                          const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  const int nd = static_cast<int>(global.size());
  const int64_t total = NumElements(box.shape);
  if (total == 0) return;
  // Trailing dimensions the box covers whole merge into one run, plus the
  // first partial one from the right.
  int split = nd - 1;
  int64_t run = 1;
  while (split >= 0) {
    run *= box.shape[split];
    if (box.shape[split] != global[split]) break;
    --split;
  }
  std::vector<int64_t> idx(nd, 0);
  for (int64_t local = 0; local < total; local += run) {
    int64_t g = 0;
    for (int d = 0; d < nd; ++d) g = g * global[d] + box.offsets[d] + idx[d];
    fn(local, g, run);
    for (int d = split - 1; d >= 0; --d) {  // the next run's start
      if (++idx[d] < box.shape[d]) break;
      idx[d] = 0;
    }
  }
}

absl::Status Dropout::Apply(RunContext& ctx, Tensor& out, const Tensor& in, bool backward) const {
  const uint64_t seed = Seed(ctx);
  auto launch = [&](Tensor& o, const Tensor& i, uint64_t offset) {
    return backward ? ctx.ops->DropoutBackward(ctx.kernel(), o, i, p_, seed, offset)
                    : ctx.ops->DropoutForward(ctx.kernel(), o, i, p_, seed, offset);
  };
  std::optional<std::pair<Box, Shape>> shard = shard_;
  if (block_) {
    if (block_->dim < 0 || block_->dim >= in.ndim()) {
      return InvalidArgument(absl::StrCat("dropout '", name(), "' input ", ShapeString(in.shape()),
                                          " split along dimension ", block_->dim),
                             "an input with that dimension");
    }
    Box box{std::vector<int64_t>(in.ndim(), 0), in.shape()};
    Shape global = in.shape();
    global[block_->dim] *= block_->count;
    box.offsets[block_->dim] = block_->index * in.dim(block_->dim);
    shard.emplace(std::move(box), std::move(global));
  }
  if (!shard) return launch(out, in, 0);
  const auto& [box, global] = *shard;
  if (in.shape() != box.shape) {
    return InvalidArgument(absl::StrCat("dropout '", name(), "' input ", ShapeString(in.shape())),
                           "the sharded box " + ShapeString(box.shape));
  }
  Tensor flat_out = out.View({out.numel()});
  const Tensor flat_in = in.View({in.numel()});
  absl::Status status;
  ForEachContiguousRun(box, global, [&](int64_t local, int64_t g, int64_t n) {
    if (!status.ok()) return;
    Tensor o = flat_out.Slice(0, local, local + n);
    status = launch(o, flat_in.Slice(0, local, local + n), static_cast<uint64_t>(g));
  });
  return status;
}

absl::StatusOr<Tensor> Dropout::Forward(RunContext& ctx, const Tensor& x) {
  // Nothing is saved: the mask is recomputed from the seed in backward.
  if (!ctx.training || p_ == 0.f) return x;
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty(x.shape(), x.dtype()));
  WEFT_RETURN_IF_ERROR(Apply(ctx, out, x, /*backward=*/false));
  return out;
}

absl::StatusOr<Tensor> Dropout::Backward(RunContext& ctx, const Tensor& dy) {
  if (p_ == 0.f) return dy;
  WEFT_ASSIGN_OR_RETURN(Tensor dx, ctx.Empty(dy.shape(), dy.dtype()));
  WEFT_RETURN_IF_ERROR(Apply(ctx, dx, dy, /*backward=*/true));
  return dx;
}

}  // namespace weft
