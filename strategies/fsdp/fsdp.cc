#include "strategies/fsdp/fsdp.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/reduce_dtype.h"
#include "core/parallel/reduce_groups.h"
#include "core/parallel/sharded_units.h"

namespace weft {

namespace {
constexpr char kDefaultWrap[] = "TransformerBlock";
}  // namespace

OptionSchema FsdpStrategy::Options() const {
  OptionSchema s;
  s.Bool("reshard_after_forward", true,
         "free gathered parameters after forward and gather again for backward");
  s.String("fsdp_wrap", kDefaultWrap,
           "module types that form one FSDP unit, separated by '|'");
  AddReduceDTypeOption(s);
  return s;
}

absl::Status FsdpStrategy::Validate(const StrategyOptionSet& options,
                                    const comm::MeshLayout* mesh) const {
  if (mesh == nullptr) {
    return FailedPrecondition("fsdp without a device mesh", "a job started with a mesh");
  }
  absl::StatusOr<int> shard = mesh->AxisSize("dp_shard");
  if (!shard.ok()) {
    return FailedPrecondition("fsdp on mesh " + mesh->ToString() + ", which has no dp_shard axis",
                              "a mesh with a dp_shard axis to shard parameters over",
                              "add a dp_shard axis, or use ddp for pure replication");
  }
  // Over a dp_shard of one rank fsdp keeps everything whole (the startup
  // notes say so), as when tp, cp, pp or ep take all the ranks. Replicas
  // without shards are ddp's job.
  const int replicate = mesh->AxisSize("dp_replicate").value_or(1);
  if (*shard == 1 && replicate > 1) {
    return FailedPrecondition(
        absl::StrCat("fsdp on mesh ", mesh->ToString(),
                     ": the dp_shard axis has size 1 under dp_replicate=", replicate),
        "dp_shard > 1 to shard over (HSDP), or no replicas",
        absl::StrCat("--dp_shard=", replicate, " --dp_replicate=1 for fsdp, or --strategy=ddp for "
                     "pure replication"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> FsdpStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  // Shards every parameter over the data-parallel ranks itself, except those
  // already sharded over dp_shard (experts under --ep), which it keeps whole
  // (ShardedUnitsParticipant::Build); nothing may be sharded over dp_replicate.
  WEFT_RETURN_IF_ERROR(CheckNotShardedOver(ctx.model().Parameters(), "dp_replicate", "fsdp"));
  if (ctx.mesh->AxisSize("dp_replicate").value_or(1) > 1) {
    WEFT_RETURN_IF_ERROR(CheckNotShardedOver(ctx.model().Parameters(), "dp_shard", "fsdp (HSDP)"));
  }
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> shard, ctx.mesh->Group("dp_shard"));
  std::shared_ptr<comm::ProcessGroup> replicate;
  if (ctx.mesh->AxisSize("dp_replicate").value_or(1) > 1) {
    WEFT_ASSIGN_OR_RETURN(replicate, ctx.mesh->Group("dp_replicate"));
  }
  WEFT_ASSIGN_OR_RETURN(ShardedUnitsParticipant::Config config,
                        ShardedUnitsParticipant::ConfigFromOptions(ctx, result, "fsdp", "fsdp_wrap",
                                                                   kDefaultWrap));
  config.reshard_after_forward = ctx.options->GetBool("reshard_after_forward");
  auto participant = std::make_unique<ShardedUnitsParticipant>(std::move(config), shard,
                                                               replicate, ctx.run->stream);
  WEFT_RETURN_IF_ERROR(participant->Build(ctx, result));
  result.participants.push_back(std::move(participant));
  return result;
}

}  // namespace weft
