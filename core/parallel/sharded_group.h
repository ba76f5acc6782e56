// ShardedGroup: a FlatParamGroup whose parameters and gradients are split
// over the ranks of one process group, with the collectives that move
// between full and sharded forms. The sharded data-parallel strategies
// (zero stages 1-3, fsdp) are different schedules over these operations.
//
// Parameters are either
//   kFull     a persistent full buffer (params are views); the shard is a
//             view of it, refreshed by AllGatherInPlace after the update, or
//   kSharded  a persistent shard; Gather() all-gathers a transient full
//             buffer (params bound to it) and ReleaseFull() frees it.
// Gradients are either
//   kFull     a persistent full buffer that backward accumulates into across
//             micro-batches; ReduceGrads() reduce-scatters it in place once
//             per step and the shard is a view of it, or
//   kSharded  a persistent shard; PrepareGrads() allocates a transient full
//             buffer before backward writes it, ReduceGrads() reduce-scatters
//             it and FinishReduce() adds the result into the shard and frees
//             the full buffer, every micro-batch.
// All collectives are issued on `stream` (CUDA: stream-ordered, no host
// sync; CPU: the group's worker thread, waited in Wait*/Finish*). Ranks must
// call the operations in the same order, like any collective.
#ifndef WEFT_CORE_PARALLEL_SHARDED_GROUP_H_
#define WEFT_CORE_PARALLEL_SHARDED_GROUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group/process_group.h"
#include "core/kernels/kernel_ops.h"
#include "core/parallel/flat_param.h"

namespace weft {

class ShardedGroup {
 public:
  enum class Mode { kFull, kSharded };
  struct Options {
    Mode params = Mode::kSharded;
    Mode grads = Mode::kSharded;
    Device device;
    NativeStream stream = nullptr;
    DType grad_dtype = DType::kF32;
    // Gradients are cast to this dtype for the reduction (mixed precision);
    // equal to grad_dtype means no cast.
    DType reduce_dtype = DType::kF32;
    KernelOps* ops = nullptr;
    Allocator* param_allocator = nullptr;
    Allocator* grad_allocator = nullptr;
    // The mesh axis (or axes) the group shards over, for placements.
    std::string axis = "dp_shard";
  };

  // Packs the parameters' current full values, keeps this rank's part as
  // the options say, and frees the parameters' own tensors.
  static absl::StatusOr<std::unique_ptr<ShardedGroup>> Create(
      std::string name, std::vector<Parameter*> params,
      std::shared_ptr<comm::ProcessGroup> group, const Options& options);

  const FlatParamGroup& flat() const { return flat_; }
  const std::string& name() const { return flat_.name(); }
  bool gathered() const { return full_param_.defined(); }

  // kSharded params: all-gather into a new full buffer and bind the params
  // to it. With async the gather is only started; WaitGathered completes it.
  absl::Status Gather(bool async);
  absl::Status WaitGathered();
  // kSharded params: unbind and free the full buffer (no-op for kFull).
  void ReleaseFull();
  // kFull params: refresh the full buffer from every rank's updated shard.
  absl::Status AllGatherInPlace();

  // kSharded grads: allocate and bind a zeroed full gradient buffer (no-op
  // if there is one, and for kFull grads).
  absl::Status PrepareGrads();
  // Reduce-scatters the full gradient (sum). kSharded: the result is added
  // into the shard by FinishReduce. With async only started.
  absl::Status ReduceGrads(bool async);
  absl::Status FinishReduce();
  bool reduce_pending() const { return reduce_work_ != nullptr; }

  Tensor shard_param() const;
  Tensor shard_grad() const;
  std::vector<OptimTarget> OptimizerTargets() const;
  // Zeroes the persistent gradient storage (the shard, or for kFull grads
  // the whole full buffer).
  absl::Status ZeroShardGrad();

  bool Contains(const Parameter* param) const;

 private:
  ShardedGroup(FlatParamGroup flat, std::shared_ptr<comm::ProcessGroup> group, Options options)
      : flat_(std::move(flat)), group_(std::move(group)), opt_(options) {}
  absl::Status Init();

  FlatParamGroup flat_;
  std::shared_ptr<comm::ProcessGroup> group_;
  Options opt_;
  Tensor full_param_;      // kFull: persistent; kSharded: while gathered
  Tensor shard_param_;     // kSharded only (kFull uses a view of full_param_)
  Tensor full_grad_;       // kFull: persistent; kSharded: between Prepare and Finish
  Tensor shard_grad_;      // kSharded only
  Tensor reduce_buffer_;   // full_grad_ cast to reduce_dtype while reducing
  std::shared_ptr<comm::Work> gather_work_;
  std::shared_ptr<comm::Work> reduce_work_;
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_SHARDED_GROUP_H_
