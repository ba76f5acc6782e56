// FlatParamGroup: parameters packed into one flat buffer, padded to a
// multiple of the shard count and split into equal contiguous shards:
//
//   full:   [ p0 | p1 | p2 | pad ]      padded_numel = num_shards * shard_numel
//   shard r = full[r * shard_numel, (r + 1) * shard_numel)
//
// Sharded data parallelism (zero, fsdp) keeps one shard per rank and
// gathers the full buffer when the parameters are needed; parameters then
// become views into it (BindValues), and gradients views into a full
// gradient buffer (BindGrads) that is reduce-scattered into shards.
#ifndef WEFT_CORE_PARALLEL_FLAT_PARAM_H_
#define WEFT_CORE_PARALLEL_FLAT_PARAM_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/nn/parameter.h"
#include "core/optim/optimizer.h"

namespace weft {

class FlatParamGroup {
 public:
  FlatParamGroup(std::string name, std::vector<Parameter*> params, int num_shards,
                 int shard_rank);

  const std::string& name() const { return name_; }
  const std::vector<Parameter*>& params() const { return params_; }
  int64_t numel() const { return numel_; }  // without padding
  int64_t padded_numel() const { return shard_numel_ * num_shards_; }
  int64_t shard_numel() const { return shard_numel_; }
  int num_shards() const { return num_shards_; }
  int shard_rank() const { return shard_rank_; }
  int64_t offset(size_t i) const { return offsets_[i]; }

  // Params' value / grad become views of `full` (padded_numel elements).
  void BindValues(const Tensor& full) const;
  void BindGrads(const Tensor& full) const;
  void UnbindValues() const;
  void UnbindGrads() const;

  // Copies every parameter's current (full) value into `full`; zeroes padding.
  absl::Status PackValues(Tensor& full, NativeStream stream) const;

  // This rank's slice of a full buffer.
  Tensor Shard(const Tensor& full) const;

  // Optimizer targets over this rank's shard: one per parameter the shard
  // overlaps, so weight decay follows each parameter. `shard_value` and
  // `shard_grad` hold shard_numel elements.
  std::vector<OptimTarget> ShardTargets(const Tensor& shard_value,
                                        const Tensor& shard_grad) const;

  // Parameter i's full value out of a full buffer (a view).
  Tensor ParamView(const Tensor& full, size_t i) const;

 private:
  std::string name_;
  std::vector<Parameter*> params_;
  std::vector<int64_t> offsets_;
  int64_t numel_ = 0;
  int64_t shard_numel_ = 0;
  int num_shards_;
  int shard_rank_;
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_FLAT_PARAM_H_
