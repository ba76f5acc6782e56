#include "strategies/zero/zero.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/reduce_dtype.h"
#include "core/parallel/reduce_groups.h"
#include "core/parallel/sharded_units.h"
#include "strategies/zero/zero_participant.h"

namespace weft {

namespace {
constexpr char kDefaultStage3Wrap[] = "TransformerBlock|Linear";
}  // namespace

OptionSchema ZeroStrategy::Options() const {
  OptionSchema s;
  s.Int("zero_stage", 1, "1: optimizer state sharded, 2: + gradients, 3: + parameters");
  s.Double("bucket_mb", 25, "stages 1-2: parameter group size in MiB, in backward order");
  s.String("zero3_wrap", kDefaultStage3Wrap,
           "stage 3: module types that form one gathered unit, separated by '|' (a "
           "wrapped module's nested wraps are part of it)");
  AddReduceDTypeOption(s);
  return s;
}

absl::Status ZeroStrategy::Validate(const StrategyOptionSet& options,
                                    const comm::MeshLayout* mesh) const {
  const int64_t stage = options.GetInt("zero_stage");
  if (stage < 1 || stage > 3) {
    return InvalidArgument(absl::StrCat("zero_stage=", stage),
                           "1 (optimizer state), 2 (+ gradients) or 3 (+ parameters)",
                           "weft never falls back to a lower stage: pick one of these");
  }
  if (mesh == nullptr) {
    return FailedPrecondition("zero without a device mesh", "a job started with a mesh");
  }
  if (!(options.GetDouble("bucket_mb") > 0)) {
    return InvalidArgument(absl::StrCat("bucket_mb=", options.GetDouble("bucket_mb")),
                           "bucket_mb > 0");
  }
  // Units are stage 3's: at 1 or 2 the option would be read by nothing.
  if (stage != 3 && options.GetString("zero3_wrap") != kDefaultStage3Wrap) {
    return InvalidArgument(
        absl::StrCat("zero3_wrap=", options.GetString("zero3_wrap"), " with zero_stage=", stage),
        "zero3_wrap only with zero_stage=3 (stages 1 and 2 gather no parameters)",
        "drop zero3_wrap, or use --zero_stage=3");
  }
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> ZeroStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  // Shards every parameter over the data-parallel ranks itself; one already
  // sharded over them (an expert) needs ddp (core/parallel/reduce_groups.h).
  for (const char* axis : {"dp_replicate", "dp_shard"}) {
    WEFT_RETURN_IF_ERROR(CheckNotShardedOver(ctx.model().Parameters(), axis, "zero"));
  }
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> group,
                        ctx.mesh->FlatGroup({"dp_replicate", "dp_shard"}));
  const int stage = static_cast<int>(ctx.options->GetInt("zero_stage"));
  if (stage == 3) {
    // Stage 3 is fsdp's unit schedule over the whole data-parallel group.
    WEFT_ASSIGN_OR_RETURN(ShardedUnitsParticipant::Config config,
                          ShardedUnitsParticipant::ConfigFromOptions(ctx, result, "zero-3", "zero3_wrap",
                                                                     kDefaultStage3Wrap));
    config.axis = "dp_replicate+dp_shard";
    auto participant = std::make_unique<ShardedUnitsParticipant>(std::move(config), group,
                                                                 nullptr, ctx.run->stream);
    WEFT_RETURN_IF_ERROR(participant->Build(ctx, result));
    result.participants.push_back(std::move(participant));
    return result;
  }
  auto participant = std::make_unique<ZeroParticipant>(stage, group, ctx.run->stream);
  WEFT_RETURN_IF_ERROR(participant->Build(ctx, result));
  result.participants.push_back(std::move(participant));
  return result;
}

}  // namespace weft
