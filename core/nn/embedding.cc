#include "core/nn/embedding.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

TokenPositionEmbedding::TokenPositionEmbedding(int64_t vocab_rows, int64_t max_positions,
                                               int64_t channels, float init_std)
    : Module("TokenPositionEmbedding"), max_positions_(max_positions) {
  wte_ = RegisterParameter("wte", {vocab_rows, channels}, InitSpec::Normal(init_std), true);
  wpe_ = max_positions > 0 ? RegisterParameter("wpe", {max_positions, channels},
                                                InitSpec::Normal(init_std), true)
                           : nullptr;
}

absl::StatusOr<Tensor> TokenPositionEmbedding::Forward(RunContext& ctx, const Tensor& tokens) {
  if (tokens.ndim() != 2 || tokens.dtype() != DType::kI32) {
    return InvalidArgument("tokens " + tokens.DebugString(), "an i32 tensor (B, T)");
  }
  if (ctx.sequence.has_value() && wpe_ != nullptr) return ForwardChunks(ctx, tokens, *ctx.sequence);
  if (wpe_ != nullptr && tokens.dim(1) > max_positions_) {
    return InvalidArgument(absl::StrCat("sequence length ", tokens.dim(1)),
                           absl::StrCat("at most max_seq_len=", max_positions_),
                           "lower seq_len or raise max_seq_len");
  }
  if (ctx.training) ctx.Saved(this)[0] = tokens;
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty({tokens.dim(0), tokens.dim(1), wte_->shape()[1]},
                                              ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(
      ctx.ops->EmbeddingForward(ctx.kernel(), out, tokens, wte_->value,
                                wpe_ != nullptr ? wpe_->value : Tensor()));
  return out;
}

absl::StatusOr<Tensor> TokenPositionEmbedding::Backward(RunContext& ctx, const Tensor& dy) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr) {
    return FailedPrecondition("embedding backward without saved tokens",
                              "Forward in training mode before Backward");
  }
  if (ctx.sequence.has_value() && wpe_ != nullptr) {
    WEFT_RETURN_IF_ERROR(BackwardChunks(ctx, dy, (*saved)[0], *ctx.sequence));
  } else {
    Tensor no_positions;
    WEFT_RETURN_IF_ERROR(ctx.ops->EmbeddingBackward(
        ctx.kernel(), wte_->grad, wpe_ != nullptr ? wpe_->grad : no_positions, dy, (*saved)[0]));
  }
  ctx.DropSaved(this);
  return Tensor();
}

// The kernel adds wpe row (t mod T) to token t; handing it the rows of this
// rank's global positions, stacked, gives each token its own position.
absl::StatusOr<Tensor> TokenPositionEmbedding::ForwardChunks(RunContext& ctx, const Tensor& tokens,
                                                             const TokenChunks& chunks) {
  if (tokens.dim(1) != chunks.size()) {
    return InvalidArgument(absl::StrCat("a sequence chunk of ", tokens.dim(1), " tokens"),
                           absl::StrCat(chunks.size(), " tokens (", chunks.count, " chunks of ",
                                        chunks.chunk_len, ")"));
  }
  for (int i = 0; i < chunks.count; ++i) {
    if (chunks.offsets[i] < 0 || chunks.offsets[i] + chunks.chunk_len > max_positions_) {
      return InvalidArgument(
          absl::StrCat("sequence chunk at positions [", chunks.offsets[i], ", ",
                       chunks.offsets[i] + chunks.chunk_len, ")"),
          absl::StrCat("positions below max_seq_len=", max_positions_),
          "lower seq_len or raise max_seq_len");
    }
  }
  const int64_t c = wte_->shape()[1], len = chunks.chunk_len;
  WEFT_ASSIGN_OR_RETURN(Tensor pe, ctx.Empty({chunks.size(), c}, wpe_->value.dtype()));
  for (int i = 0; i < chunks.count; ++i) {
    Tensor dst = pe.Slice(0, i * len, (i + 1) * len);
    WEFT_RETURN_IF_ERROR(dst.CopyFrom(
        wpe_->value.Slice(0, chunks.offsets[i], chunks.offsets[i] + len), ctx.stream));
  }
  if (ctx.training) ctx.Saved(this)[0] = tokens;
  WEFT_ASSIGN_OR_RETURN(Tensor out,
                        ctx.Empty({tokens.dim(0), tokens.dim(1), c}, ctx.compute_dtype));
  WEFT_RETURN_IF_ERROR(ctx.ops->EmbeddingForward(ctx.kernel(), out, tokens, wte_->value, pe));
  return out;
}

absl::Status TokenPositionEmbedding::BackwardChunks(RunContext& ctx, const Tensor& dy,
                                                    const Tensor& tokens,
                                                    const TokenChunks& chunks) {
  const int64_t c = wte_->shape()[1], len = chunks.chunk_len;
  WEFT_ASSIGN_OR_RETURN(Tensor dpe, ctx.Zeros({chunks.size(), c}, wpe_->grad.dtype()));
  WEFT_RETURN_IF_ERROR(ctx.ops->EmbeddingBackward(ctx.kernel(), wte_->grad, dpe, dy, tokens));
  for (int i = 0; i < chunks.count; ++i) {
    Tensor g = wpe_->grad.Slice(0, chunks.offsets[i], chunks.offsets[i] + len);
    WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), g, g, dpe.Slice(0, i * len, (i + 1) * len)));
  }
  return absl::OkStatus();
}

}  // namespace weft
