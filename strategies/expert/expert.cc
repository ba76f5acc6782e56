#include "strategies/expert/expert.h"

#include "absl/strings/str_cat.h"
#include "comm/device_mesh/device_mesh.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/moe.h"
#include "core/parallel/narrow_parameter.h"
#include "strategies/expert/all_to_all_dispatcher.h"
#include "strategies/expert/expert_participant.h"

namespace weft {

OptionSchema ExpertStrategy::Options() const {
  OptionSchema s;
  s.Int("ep", 1, "expert-parallel ranks: experts split over blocks of ep dp_shard ranks");
  s.Bool("ep_overlap", true,
         "compute the experts on a rank's own tokens while the others' are exchanged");
  return s;
}

absl::Status ExpertStrategy::Validate(const StrategyOptionSet& options,
                                      const comm::MeshLayout* mesh) const {
  const int64_t ep = options.GetInt("ep");
  if (ep < 1) return InvalidArgument(absl::StrCat("ep=", ep), "ep >= 1");
  if (mesh == nullptr) {
    if (ep == 1) return absl::OkStatus();
    return FailedPrecondition(absl::StrCat("ep=", ep, " in a single process"),
                              "a job of several ranks for expert parallelism",
                              "launch ep (or a multiple of ep) ranks");
  }
  const int shard = mesh->AxisSize("dp_shard").value_or(1);
  if (shard % ep != 0) {
    return InvalidArgument(
        absl::StrCat("ep=", ep, " does not divide dp_shard=", shard, " (mesh ", mesh->ToString(),
                     ")"),
        "ep dividing the data-parallel (dp_shard) size",
        absl::StrCat("use --ep among the divisors of ", shard, " or change the number of ranks"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> ExpertStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  const int ep = static_cast<int>(ctx.options->GetInt("ep"));
  std::vector<MoeLayer*> layers;
  for (Module* m : ctx.model().Modules()) {
    if (auto* layer = dynamic_cast<MoeLayer*>(m)) layers.push_back(layer);
  }
  if (layers.empty()) {
    return FailedPrecondition("--strategy=expert on a model without MoE layers",
                              "a model with mixture-of-experts blocks",
                              "set --moe_every (and --num_experts, --top_k) for GPT");
  }
  for (MoeLayer* layer : layers) {
    const int e = layer->config().num_experts;
    if (e % ep != 0) {
      return InvalidArgument(
          absl::StrCat(layer->name(), " has num_experts=", e, ", not divisible by ep=", ep),
          "num_experts a multiple of ep", "choose --num_experts or --ep so that ep divides it");
    }
  }
  if (ep == 1 && ctx.mesh != nullptr && ctx.mesh->world_size() > 1) {
    result.notes.push_back(
        "expert with ep=1: every rank holds all experts (set --ep to split them over ranks)");
  }
  if (ep == 1 || ctx.mesh == nullptr) return result;

  // My ep block along dp_shard, and the same position in the other blocks.
  WEFT_ASSIGN_OR_RETURN(std::vector<int> shard_ranks, ctx.mesh->GroupRanks("dp_shard"));
  WEFT_ASSIGN_OR_RETURN(int s, ctx.mesh->Coordinate("dp_shard"));
  const int index = s % ep, block = s / ep;
  std::vector<int> ep_ranks(shard_ranks.begin() + block * ep,
                            shard_ranks.begin() + (block + 1) * ep);
  std::vector<int> replica_ranks;
  for (size_t i = index; i < shard_ranks.size(); i += ep) replica_ranks.push_back(shard_ranks[i]);
  // Every rank creates its two groups in the same order.
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> ep_group,
                        ctx.mesh->NewGroup(ep_ranks, "ep"));
  std::shared_ptr<comm::ProcessGroup> replicas;
  if (replica_ranks.size() > 1) {
    WEFT_ASSIGN_OR_RETURN(replicas, ctx.mesh->NewGroup(replica_ranks, "ep_replicas"));
  }

  const bool overlap = ctx.options->GetBool("ep_overlap");
  std::vector<Parameter*> expert_params;
  std::vector<std::shared_ptr<AllToAllDispatcher>> dispatchers;
  for (MoeLayer* layer : layers) {
    for (Parameter* p : layer->experts()->expert_parameters()) {
      WEFT_RETURN_IF_ERROR(NarrowParameter(*p, "dp_shard", 0, index, ep, ctx));
      expert_params.push_back(p);
    }
    dispatchers.push_back(
        std::make_shared<AllToAllDispatcher>(ep_group, layer->config().num_experts, overlap));
    layer->set_dispatcher(dispatchers.back());
  }
  result.keep_alive.push_back(ep_group);
  if (replicas != nullptr) result.keep_alive.push_back(replicas);
  result.participants.push_back(std::make_unique<ExpertParticipant>(
      std::move(expert_params), std::move(dispatchers), ep_group, replicas,
      ctx.applied->model_parallel, ctx.applied, ctx.run->ops, ctx.run->kernel()));
  return result;
}

}  // namespace weft
