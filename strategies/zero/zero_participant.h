// ZeroParticipant: the step schedule of ZeRO stages 1 and 2 over
// ShardedGroups (see zero.h for what each stage keeps and when it
// communicates). Stage 3 is core/parallel/sharded_units.h.
#ifndef WEFT_STRATEGIES_ZERO_ZERO_PARTICIPANT_H_
#define WEFT_STRATEGIES_ZERO_ZERO_PARTICIPANT_H_

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/parallel/reduce_queue.h"
#include "core/parallel/sharded_group.h"
#include "core/parallel/strategy.h"

namespace weft {

class ZeroParticipant : public StepParticipant {
 public:
  ZeroParticipant(int stage, std::shared_ptr<comm::ProcessGroup> group, NativeStream stream)
      : stage_(stage), group_(std::move(group)), stream_(stream) {}

  absl::Status Build(StrategyContext& ctx, StrategyResult& result);

  absl::Status ZeroGrad() override;
  // Every gradient lives in a group's buffers (or is unbound between steps).
  bool ZeroesModelGradients() const override { return true; }
  absl::Status BeforeBackward(const BackwardInfo& info) override;
  bool ReducesEveryBackward() const override { return stage_ >= 2; }
  absl::Status FinishGradients() override;
  std::optional<std::vector<OptimTarget>> OptimizerTargets() override;
  absl::Status ReduceGradNormSq(Tensor& norm_sq) override;
  absl::Status AfterOptimizerStep() override;


 private:
  absl::Status AddGroup(const std::string& name, std::vector<Parameter*> params,
                        StrategyContext& ctx);
  void InstallHooks(Model& model);
  absl::Status OnPreBackward(Module& m);
  absl::Status OnPostBackward(Module& m);
  absl::Status LaunchReduce(size_t g);

  const int stage_;
  std::shared_ptr<comm::ProcessGroup> group_;
  NativeStream stream_;
  std::vector<std::unique_ptr<ShardedGroup>> groups_;
  std::vector<int> pending_;  // params of each group whose owner has not finished backward
  absl::flat_hash_map<const Parameter*, size_t> group_of_;
  // At most two full gradient buffers in flight.
  ReduceQueue reduces_{2};
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_ZERO_ZERO_PARTICIPANT_H_
