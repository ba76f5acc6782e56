// FsdpParticipant: the per-unit gather / reshard / reduce schedule of fsdp
// (see fsdp.h) and its part in the training step.
//
// Parameters another strategy already sharded over dp_shard (experts under
// --ep) are kept whole, outside the units: fsdp zeroes their gradients,
// lists them as whole optimizer targets and counts them in the gradient
// norm; the strategy that placed them reduces their gradients.
#ifndef WEFT_STRATEGIES_FSDP_FSDP_PARTICIPANT_H_
#define WEFT_STRATEGIES_FSDP_FSDP_PARTICIPANT_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/kernels/kernel_ops.h"
#include "core/parallel/reduce_queue.h"
#include "core/parallel/sharded_group.h"
#include "core/parallel/strategy.h"

namespace weft {

class FsdpParticipant : public StepParticipant {
 public:
  struct Config {
    std::set<std::string> wrap_types;
    bool reshard_after_forward = true;
    DType grad_dtype = DType::kF32;
    DType reduce_dtype = DType::kF32;
  };
  FsdpParticipant(Config config, std::shared_ptr<comm::ProcessGroup> shard,
                  std::shared_ptr<comm::ProcessGroup> replicate, NativeStream stream)
      : config_(std::move(config)),
        shard_(std::move(shard)),
        replicate_(std::move(replicate)),
        stream_(stream) {}

  absl::Status Build(StrategyContext& ctx);

  absl::Status ZeroGrad() override;
  // Every gradient lives in a group's buffers (or is unbound between steps).
  bool ZeroesModelGradients() const override { return true; }
  absl::Status BeforeBackward(const BackwardInfo& info) override;
  absl::Status FinishGradients() override;
  std::optional<std::vector<OptimTarget>> OptimizerTargets() override;
  absl::Status ReduceGradNormSq(Tensor& norm_sq) override;

  int num_units() const { return static_cast<int>(units_.size()); }

 private:
  absl::Status AddUnit(const std::string& name, std::vector<Parameter*> params,
                       StrategyContext& ctx);
  void InstallHooks(Model& model);
  absl::Status Gathered(int unit);  // gathered and complete
  absl::Status Prefetch(int unit);  // starts a gather; no-op out of range
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
  absl::flat_hash_map<const Parameter*, int> unit_of_;
  std::vector<Parameter*> kept_;  // sharded over dp_shard by another strategy
  KernelOps* ops_ = nullptr;
  Device device_ = Device::Cpu();
  // At most two full gradient buffers in flight.
  ReduceQueue reduces_{2};
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_FSDP_FSDP_PARTICIPANT_H_
