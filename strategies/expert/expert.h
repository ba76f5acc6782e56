// expert: expert parallelism for models with MoeLayer (core/nn/moe.h).
//
// --ep=N splits the data-parallel ranks of dp_shard into blocks of N
// consecutive ranks (the ep groups; comm/device_mesh/training_mesh.h). In
// each block, rank i holds experts [i * E / N, (i + 1) * E / N) of every MoE
// layer and serves them to the block's tokens: each rank routes its own
// tokens, then an all_to_all_v moves every token row to its expert's rank
// and back (AllToAllDispatcher).
//
// Parameters. Expert weights get the placement Shard(0) over dp_shard in N
// blocks (added to any placement they have), sliced from the
// single-process initialisation, so:
//   - dense weights stay replicated and reduce over the whole data-parallel
//     group, by the data-parallel strategy (ddp, or fsdp which also shards
//     them);
//   - expert gradients reduce only over the ranks holding the same experts:
//     over dp_replicate by that strategy (core/parallel/reduce_groups.h),
//     and over the other ep blocks of dp_shard by this strategy (after
//     every participant's FinishGradients);
//   - the gradient norm adds the squares of the other ep ranks' experts.
// Checkpoints and the parity harness see the shards through the sharding
// export (Shard boxes; replica = data-parallel rank / N).
//
// Routing happens per rank: with a capacity, each rank's micro-batch is
// routed with its own per-expert capacity, exactly as one process running
// each rank's tokens as a separate micro-batch would.
//
// With cp the ep groups run along dp_shard at each cp position (cp ranks
// hold the same experts, and cp sums their gradients like every other
// parameter's); the cp ranks route their chunks as one group, whole
// sequences (strategies/cp/cp_routing_exchange.h), and each ep group
// exchanges the rows of its cp position's chunks.
//
// With tp (applied before this strategy) the ep groups run along dp_shard
// at each tp position; the experts arrive here already split over tp by
// hidden units (strategies/tp/parallel_experts.h) and get their dp_shard
// split on top. The gradient norm completes both parts over tp first.
//
// Option ep_overlap (default true): the dispatcher computes a rank's own
// rows while the others are exchanged (all_to_all_dispatcher.h).
//
// Errors: ep not dividing dp_shard (the mesh), experts not divisible
// by ep, no MoE layer in the model.
#ifndef WEFT_STRATEGIES_EXPERT_EXPERT_H_
#define WEFT_STRATEGIES_EXPERT_EXPERT_H_

#include <memory>
#include <string>
#include <vector>

#include "core/parallel/parallel_plan.h"
#include "core/parallel/strategy.h"

namespace weft {

class ExpertStrategy : public Strategy {
 public:
  static std::unique_ptr<Strategy> Create() { return std::make_unique<ExpertStrategy>(); }

  std::string Name() const override { return "expert"; }
  StrategyPhase Phase() const override { return StrategyPhase::kExpert; }
  // ep is carved from dp_shard (x cp), not an axis of the mesh.
  std::vector<std::string> RequiredAxes() const override { return {"ep"}; }
  // --ep > 1 asks for expert-parallel ranks.
  bool JoinsUnnamed(const PlanView& plan) const override { return plan.AxisSize("ep") > 1; }
  // The dense weights need a data-parallel reduction over several ranks:
  // ddp, unless the plan names another data-parallel strategy.
  std::vector<std::string> Implies(const PlanView& plan) const override {
    if (plan.world_size() > 1) return {"ddp"};
    return {};
  }
  OptionSchema Options() const override;
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_EXPERT_EXPERT_H_
