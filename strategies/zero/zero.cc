#include "strategies/zero/zero.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/zero/zero_participant.h"

namespace weft {

absl::Status ZeroStrategy::Validate(const StrategyOptions& options,
                                    const comm::MeshLayout* mesh) const {
  if (options.zero_stage < 1 || options.zero_stage > 3) {
    return InvalidArgument(absl::StrCat("zero_stage=", options.zero_stage),
                           "1 (optimizer state), 2 (+ gradients) or 3 (+ parameters)",
                           "weft never falls back to a lower stage: pick one of these");
  }
  if (mesh == nullptr) {
    return FailedPrecondition("zero without a device mesh", "a job started with a mesh");
  }
  if (!(options.bucket_mb > 0)) {
    return InvalidArgument(absl::StrCat("bucket_mb=", options.bucket_mb), "bucket_mb > 0");
  }
  if (!options.reduce_dtype.empty() && options.reduce_dtype != "f32" &&
      options.reduce_dtype != "bf16") {
    return InvalidArgument("reduce_dtype=" + options.reduce_dtype, "f32 or bf16");
  }
  return absl::OkStatus();
}

absl::Status ZeroStrategy::Apply(StrategyContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> group,
                        ctx.mesh->FlatGroup({"dp_replicate", "dp_shard"}));
  auto participant =
      std::make_unique<ZeroParticipant>(ctx.options->zero_stage, group, ctx.run->stream);
  WEFT_RETURN_IF_ERROR(participant->Build(ctx));
  ctx.state->participants.push_back(std::move(participant));
  return absl::OkStatus();
}

}  // namespace weft
