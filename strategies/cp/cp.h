// cp: context parallelism as a strategy plugin (--cp=N, or --strategy=cp).
//
// Splits every sequence over the N ranks of the mesh's cp axis in zigzag
// chunks (zigzag.h), swaps each attention core (core/nn/attention_core.h)
// for RingAttention (ring_attention.h) and wraps the root in ContextParallelModel
// (cp_model.h). Loss and gradients stay exact:
// - each rank's loss sums its own targets, scaled by the whole sequence's
//   count, so losses sum over cp (and dp) to the one-process loss;
// - every parameter is replicated over cp; its gradients are summed over
//   the cp group after the data-parallel reduction (cp_participant.h), so
//   each cp rank applies the same update, and gradient norms count each
//   parameter once.
// - dropout masks follow the chunks' global positions (RunContext::sequence,
//   core/nn/dropout.h): each rank draws its chunks' rows of the
//   single-process masks.
// - MoE layers route the whole sequences of a micro-batch as one group, as
//   in one process: cp installs a CpRoutingExchange on each MoeLayer
//   (cp_routing_exchange.h: choices all-gathered per layer call, the
//   one-process plan built on every rank).
// Composes with ddp, zero and fsdp on the dp axes, with expert parallelism
// (ep along dp_shard at each cp position), with tp and sp (under
// sp ring attention gets the tp rank's sequence block of the chunks; its
// column-parallel qkv gathers them whole), and with pp:
// cp is applied first (phase kTensorParallel), and the wrapper lists the
// model's stages and, through Model::LocalBatch, the chunks they run on, so
// the pipeline embeds, sends and takes the loss on this rank's chunks only.
// Requires seq_len divisible by 2 x cp.
// Depends only on comm/ and core/.
#ifndef WEFT_STRATEGIES_CP_CP_H_
#define WEFT_STRATEGIES_CP_CP_H_

#include <memory>

#include "core/parallel/parallel_plan.h"
#include "core/parallel/strategy.h"

namespace weft {

class ContextParallelStrategy : public Strategy {
 public:
  static std::unique_ptr<Strategy> Create() { return std::make_unique<ContextParallelStrategy>(); }

  std::string Name() const override { return "cp"; }
  StrategyPhase Phase() const override { return StrategyPhase::kTensorParallel; }
  std::vector<std::string> RequiredAxes() const override { return {"cp"}; }
  // After tp/sp: ring attention then adopts their parallel qkv and proj.
  std::vector<std::string> After() const override { return {"tp", "sp"}; }
  // --cp > 1 asks for context-parallel ranks.
  bool JoinsUnnamed(const PlanView& plan) const override { return plan.AxisSize("cp") > 1; }
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_CP_CP_H_
