#include "core/parallel/grad_norm.h"

#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/parameter.h"

namespace weft {

absl::Status GradNormSquared(KernelOps& ops, const KernelContext& ctx,
                             const std::vector<OptimTarget>& targets,
                             comm::ProcessGroup* model_parallel, Tensor& out) {
  std::vector<Tensor> sharded, replicated;
  for (const OptimTarget& t : targets) {
    // Copies (a tied weight's second holder) are counted by their owner.
    if (t.param != nullptr && t.param->copy_index() > 0) continue;
    // Only tp splits count here: experts are also Shard(0) over dp_shard,
    // which the expert strategy sums itself (and a tp-replicated expert
    // bias must not be counted tp times).
    const bool split = t.param != nullptr && t.param->placement().ShardedOver("tp");
    // A tp block several tp ranks hold (K/V heads fewer than tp) is
    // counted by its first holder.
    if (split && t.param->mp_replica() > 0) continue;
    (split ? sharded : replicated).push_back(t.grad);
  }
  if (model_parallel == nullptr || model_parallel->size() == 1) {
    replicated.insert(replicated.end(), sharded.begin(), sharded.end());
    return ops.SumSquares(ctx, out, replicated);
  }
  WEFT_ASSIGN_OR_RETURN(Tensor part, Tensor::Zeros({1}, DType::kF32, ctx.device,
                                                   ctx.allocator, ctx.stream));
  WEFT_RETURN_IF_ERROR(ops.SumSquares(ctx, part, sharded));
  WEFT_RETURN_IF_ERROR(Annotate(
      model_parallel->AllReduce(part, {.op = comm::ReduceOp::kSum, .stream = ctx.stream})->Wait(),
      "gradient norm over the model-parallel group"));
  WEFT_RETURN_IF_ERROR(ops.SumSquares(ctx, out, replicated));
  return ops.Add(ctx, out, out, part);
}

}  // namespace weft
