#include "core/nn/embedding.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

TokenPositionEmbedding::TokenPositionEmbedding(int64_t vocab_rows, int64_t max_positions,
                                               int64_t channels, float init_std)
    : Module("TokenPositionEmbedding"), max_positions_(max_positions) {
  wte_ = RegisterParameter("wte", {vocab_rows, channels}, InitSpec::Normal(init_std), true);
  wpe_ = RegisterParameter("wpe", {max_positions, channels}, InitSpec::Normal(init_std), true);
}

absl::StatusOr<Tensor> TokenPositionEmbedding::Forward(RunContext& ctx, const Tensor& tokens) {
  if (tokens.ndim() != 2 || tokens.dtype() != DType::kI32) {
    return InvalidArgument("tokens " + tokens.DebugString(), "an i32 tensor (B, T)");
  }
  if (tokens.dim(1) > max_positions_) {
    return InvalidArgument(absl::StrCat("sequence length ", tokens.dim(1)),
                           absl::StrCat("at most max_seq_len=", max_positions_),
                           "lower seq_len or raise max_seq_len");
  }
  if (ctx.training) ctx.Saved(this)[0] = tokens;
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty({tokens.dim(0), tokens.dim(1), wte_->shape()[1]},
                                              ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(
      ctx.ops->EmbeddingForward(ctx.kernel(), out, tokens, wte_->value, wpe_->value));
  return out;
}

absl::StatusOr<Tensor> TokenPositionEmbedding::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("embedding backward without saved tokens",
                              "Forward in training mode before Backward");
  }
  WEFT_RETURN_IF_ERROR(
      ctx.ops->EmbeddingBackward(ctx.kernel(), wte_->grad, wpe_->grad, dy, (*saved)[0]));
  ctx.DropSaved(this);
  return Tensor();
}

}  // namespace weft
