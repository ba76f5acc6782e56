// ShardedUnitsParticipant: the per-unit gather / reshard / reduce schedule
// that fsdp and zero stage 3 share (strategies/fsdp/fsdp.h describes it),
// and its part in the training step. A unit is a wrapped module (by type)
// whose parameters form one flat group, gathered and reduced together, so a
// module's backward may write a gradient of a sibling in the same unit (the
// MLP's fused GELU backward writes fc's bias gradient during proj's).
//
// Parameters another strategy already sharded over dp_shard (experts under
// --ep) are kept whole, outside the units: the participant zeroes their
// gradients and lists them as whole optimizer targets; the strategy that
// placed them reduces their gradients and hands in their share of the
// gradient norm, which this participant sums over dp_shard with the rest.
#ifndef WEFT_CORE_PARALLEL_SHARDED_UNITS_H_
#define WEFT_CORE_PARALLEL_SHARDED_UNITS_H_

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/kernels/kernel_ops.h"
#include "core/parallel/reduce_queue.h"
#include "core/parallel/sharded_group.h"
#include "core/parallel/strategy.h"

namespace weft {

class ShardedUnitsParticipant : public StepParticipant {
 public:
  struct Config {
    std::set<std::string> wrap_types;
    bool reshard_after_forward = true;
    DType grad_dtype = DType::kF32;
    DType reduce_dtype = DType::kF32;
    // The mesh axis (or axes) the units shard over, for placements.
    std::string axis = "dp_shard";
    // Names for errors: the strategy, and the option that sets wrap_types.
    std::string strategy = "fsdp";
    std::string wrap_option = "fsdp_wrap";
  };
  // A config from the strategy's options: the module types listed ('|'-
  // separated) in option `wrap_option`, the job's gradient dtype and the
  // reduce_dtype option. A type the user listed (the option differs from
  // `default_wrap`) that names no module of the model is an error: a typo
  // would silently make the whole model one unit.
  // Notes for the user go into `result`.
  static absl::StatusOr<Config> ConfigFromOptions(StrategyContext& ctx, StrategyResult& result,
                                                  std::string strategy,
                                                  std::string wrap_option,
                                                  const std::string& default_wrap);

  ShardedUnitsParticipant(Config config, std::shared_ptr<comm::ProcessGroup> shard,
                  std::shared_ptr<comm::ProcessGroup> replicate, NativeStream stream)
      : config_(std::move(config)),
        shard_(std::move(shard)),
        replicate_(std::move(replicate)),
        stream_(stream) {}

  // Notes go into `result`, which also says the norm sums over dp_shard.
  absl::Status Build(StrategyContext& ctx, StrategyResult& result);

  absl::Status ZeroGrad() override;
  // Every gradient lives in a group's buffers (or is unbound between steps).
  bool ZeroesModelGradients() const override { return true; }
  absl::Status BeforeBackward(const BackwardInfo& info) override;
  bool ReducesEveryBackward() const override { return true; }
  absl::Status FinishGradients() override;
  std::optional<std::vector<OptimTarget>> OptimizerTargets() override;
  absl::Status ReduceGradNormSq(Tensor& norm_sq) override;

  int num_units() const { return static_cast<int>(units_.size()); }

 private:
  absl::Status AddUnit(const std::string& name, std::vector<Parameter*> params,
                       StrategyContext& ctx);
  void InstallHooks(Model& model);
  absl::Status Gathered(int unit);  // gathered and complete
  // Whether `unit` is in the stages that run now (RunContext::stage_range).
  bool Runs(int unit, const RunContext& ctx) const;
  // Starts a gather; no-op for root units, out of range, or outside the
  // stages that run now.
  absl::Status Prefetch(int unit, const RunContext& ctx);
  absl::Status ReduceUnit(int unit);

  Config config_;
  std::shared_ptr<comm::ProcessGroup> shard_;
  std::shared_ptr<comm::ProcessGroup> replicate_;
  NativeStream stream_;
  // units_[0, num_root_) belong to the root module: the parameters outside
  // wrapped modules, then one unit per parameter with copies on other ranks
  // (Parameter::has_copies); the wrapped modules follow in forward order.
  std::vector<std::unique_ptr<ShardedGroup>> units_;
  int num_root_ = 1;
  std::vector<Module*> unit_module_;
  // Per unit, the indices of the model's Stages() that use its parameters
  // (its module's, or for a root unit the modules holding or borrowing them;
  // empty: none, e.g. a model without stages).
  std::vector<std::vector<int>> unit_stages_;
  absl::flat_hash_map<const Parameter*, int> unit_of_;
  std::vector<Parameter*> kept_;  // sharded over dp_shard by another strategy
  // At most two full gradient buffers in flight.
  ReduceQueue reduces_{2};
};

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_SHARDED_UNITS_H_
