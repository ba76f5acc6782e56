#include "strategies/cp/cp.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/moe.h"
#include "strategies/cp/cp_model.h"
#include "strategies/cp/cp_participant.h"
#include "strategies/cp/cp_routing_exchange.h"
#include "strategies/cp/ring.h"
#include "strategies/cp/ring_attention.h"
#include "strategies/cp/zigzag.h"

namespace weft {

absl::Status ContextParallelStrategy::Validate(const StrategyOptionSet&,
                                               const comm::MeshLayout* mesh) const {
  if (mesh == nullptr) {
    return InvalidArgument("--strategy=cp in a single process", "--cp=N > 1 ranks",
                           "launch N ranks with --cp=N");
  }
  WEFT_ASSIGN_OR_RETURN(int cp, mesh->AxisSize("cp"));
  if (cp < 1) return InvalidArgument(absl::StrCat("--cp=", cp), "cp >= 1");
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> ContextParallelStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  // A strategy that owns the step (pp) runs the stages of the root it found;
  // wrapping that root afterwards would never narrow its batches to the
  // chunks. The composer's phase order applies cp first (strategy.h).
  if (ctx.applied != nullptr && ctx.applied->step_schedule != nullptr) {
    return FailedPrecondition(
        absl::StrCat("--strategy=cp applied after a strategy that owns the step schedule "
                     "(applied so far: ",
                     absl::StrJoin(ctx.applied->strategy_names, ","), ")"),
        "cp applied before pipeline parallelism, so the pipeline splits the cp model's stages",
        "apply strategies through ComposeStrategies, which orders them by phase");
  }
  if (ctx.mesh == nullptr) {
    return InvalidArgument("--strategy=cp without a device mesh", "a multi-rank job with --cp");
  }
  WEFT_ASSIGN_OR_RETURN(int rank, ctx.mesh->Coordinate("cp"));
  WEFT_ASSIGN_OR_RETURN(int size, ctx.mesh->AxisSize("cp"));
  // Fail at startup, not at the first forward after the model is built.
  WEFT_ASSIGN_OR_RETURN(int64_t seq_len, ProbeSequenceLength(ctx.model(), *ctx.run));
  if (seq_len > 0) WEFT_RETURN_IF_ERROR(cp::CheckSeqLen(seq_len, size));
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> group, ctx.mesh->Group("cp"));
  WEFT_ASSIGN_OR_RETURN(std::vector<int> ranks, ctx.mesh->GroupRanks("cp"));
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> ring_group,
                        ctx.mesh->NewGroup(ranks, "cp_ring"));
  auto ring = std::make_shared<cp::Ring>(ring_group);
  WEFT_ASSIGN_OR_RETURN(int swapped, cp::SwapInRingAttention(ctx.model(), ring));
  if (swapped == 0) {
    return FailedPrecondition(
        absl::StrCat("model ", ctx.model().Summary(), " has no attention core to swap"),
        "a model whose attention layers ring attention can replace",
        "context parallelism only splits sequences through attention");
  }
  // MoE layers route the cp group's chunks as whole sequences: one
  // exchange over the cp group serves them all (cp_routing_exchange.h).
  std::shared_ptr<cp::CpRoutingExchange> routing;
  for (Module* m : ctx.model().Modules()) {
    auto* layer = dynamic_cast<MoeLayer*>(m);
    if (layer == nullptr) continue;
    if (routing == nullptr) routing = std::make_shared<cp::CpRoutingExchange>(group);
    layer->set_routing_exchange(routing);
  }
  *ctx.model_slot =
      std::make_unique<cp::ContextParallelModel>(std::move(*ctx.model_slot), rank, size);
  result.participants.push_back(
      std::make_unique<cp::CpParticipant>(group, ring, routing, ctx.run->stream));
  result.keep_alive.push_back(ring_group);
  // Each cp rank's loss covers its chunks: sums for logging span cp too.
  result.loss_group = group;
  // The cp ranks hold identical state: one of them is the exported replica 0.
  result.replica_copies = size;
  result.replica_copy = rank;
  return result;
}

}  // namespace weft
