#include "strategies/cp/ring_attention.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/attention_core.h"
#include "strategies/cp/zigzag.h"

namespace weft::cp {
namespace {

absl::Status Waited(const std::shared_ptr<comm::Work>& w, const char* what) {
  return Annotate(w->Wait(), what);
}

}  // namespace

RingAttention::RingAttention(int64_t head_dim, std::shared_ptr<Ring> ring)
    : Module("RingAttention"), head_dim_(head_dim), ring_(std::move(ring)) {}

absl::StatusOr<Tensor> RingAttention::Forward(RunContext& ctx, const Tensor& qkv) {
  if (qkv.ndim() != 3 || qkv.dim(2) % (3 * head_dim_) != 0) {
    return InvalidArgument("ring attention qkv " + ShapeString(qkv.shape()),
                           absl::StrCat("(B, T_local, 3 x heads x ", head_dim_, ")"));
  }
  if (!ctx.sequence.has_value() || ctx.sequence->count != 2) {
    return FailedPrecondition("ring attention without this rank's zigzag chunks",
                              "RunContext::sequence with 2 chunks covering the input",
                              "run the model through the cp strategy's root wrapper");
  }
  const TokenChunks mine = *ctx.sequence;
  if (qkv.dim(1) != mine.size()) {
    return FailedPrecondition(
        absl::StrCat("ring attention queries of ", qkv.dim(1), " tokens on a rank holding ",
                     mine.size(), " tokens of each sequence"),
        "qkv projections of the rank's whole chunks",
        "under sp the column-parallel qkv must gather the sequence blocks (a plain qkv takes "
        "the chunks whole)");
  }
  const int64_t b = qkv.dim(0), t = qkv.dim(1);
  // A tensor-parallel layer gives this rank's heads only: W/tp columns each.
  const int64_t c = qkv.dim(2) / 3;
  const int heads = static_cast<int>(c / head_dim_);
  // The K/V columns, contiguous: what travels the ring.
  WEFT_ASSIGN_OR_RETURN(Tensor kv, qkv.Slice(2, c, 3 * c).Contiguous(ctx.stream));  // (B, T, 2C)
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty({b, t, c}, ctx.compute_dtype));
  WEFT_ASSIGN_OR_RETURN(Tensor lse, ctx.Empty({b, heads, t}, DType::kF32));
  Tensor cur = kv;
  for (int s = 0; s < ring_->size(); ++s) {
    std::shared_ptr<comm::Work> inflight;
    Tensor next;
    if (s + 1 < ring_->size()) {
      WEFT_ASSIGN_OR_RETURN(next, ctx.Empty(kv.shape(), kv.dtype()));
      inflight = ring_->Exchange(cur, next, kTagKvForward, ctx.stream);
    }
    WEFT_RETURN_IF_ERROR(
        ctx.ops->AttentionBlockForward(ctx.kernel(), out, lse, qkv, mine, cur,
                                       ZigzagOf(ring_->Source(s), ring_->size(), mine.chunk_len),
                                       heads, /*accumulate=*/s > 0));
    if (inflight) {
      WEFT_RETURN_IF_ERROR(Waited(inflight, "ring attention forward K/V exchange"));
      cur = next;
    }
  }
  if (ctx.training) {
    SavedActivations& saved = ctx.Saved(this);
    saved[kQkv] = qkv;
    saved[kKv] = kv;
    saved[kOut] = out;
    saved[kLogSumExp] = lse;
  }
  return out;
}

absl::StatusOr<Tensor> RingAttention::Backward(RunContext& ctx, const Tensor& dout) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr || !ctx.sequence.has_value()) {
    return FailedPrecondition("ring attention backward without saved activations",
                              "Forward in training mode (with the rank's chunks) before Backward");
  }
  const TokenChunks mine = *ctx.sequence;
  const Tensor qkv = (*saved)[kQkv], kv = (*saved)[kKv];
  const Tensor out = (*saved)[kOut], lse = (*saved)[kLogSumExp];
  const int64_t c = qkv.dim(2) / 3;
  const int heads = static_cast<int>(c / head_dim_);
  WEFT_ASSIGN_OR_RETURN(Tensor dqkv, ctx.Zeros(qkv.shape(), ctx.compute_dtype));
  const int n = ring_->size();
  Tensor cur = kv;
  Tensor dkv_in, dkv_sent;  // the travelling dK/dV: received, and in flight out
  std::shared_ptr<comm::Work> dkv_work;
  for (int s = 0; s < n; ++s) {
    std::shared_ptr<comm::Work> kv_work;
    Tensor next;
    if (s + 1 < n) {
      WEFT_ASSIGN_OR_RETURN(next, ctx.Empty(kv.shape(), kv.dtype()));
      kv_work = ring_->Exchange(cur, next, kTagKvBackward, ctx.stream);
    }
    // This rank's queries' share of block Source(s)'s gradient, computed
    // while the share of the ranks before it is still arriving.
    WEFT_ASSIGN_OR_RETURN(Tensor partial, ctx.Zeros(kv.shape(), kv.dtype()));
    WEFT_RETURN_IF_ERROR(ctx.ops->AttentionBlockBackward(
        ctx.kernel(), dqkv, partial, dout, qkv, mine, cur,
        ZigzagOf(ring_->Source(s), ring_->size(), mine.chunk_len), out, lse, heads));
    if (dkv_work) {
      WEFT_RETURN_IF_ERROR(Waited(dkv_work, "ring attention dK/dV exchange"));
      WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), partial, partial, dkv_in));
    }
    if (n > 1) {
      // After the last step this sends block Source(n-1) = rank+1's
      // gradient home, and receives this rank's own.
      WEFT_ASSIGN_OR_RETURN(dkv_in, ctx.Empty(kv.shape(), kv.dtype()));
      dkv_sent = partial;
      dkv_work = ring_->Exchange(dkv_sent, dkv_in, kTagDkv, ctx.stream);
    } else {
      dkv_in = partial;
    }
    if (kv_work) {
      WEFT_RETURN_IF_ERROR(Waited(kv_work, "ring attention backward K/V exchange"));
      cur = next;
    }
  }
  if (dkv_work) WEFT_RETURN_IF_ERROR(Waited(dkv_work, "ring attention dK/dV exchange"));
  Tensor dkv_cols = dqkv.Slice(2, c, 3 * c);
  WEFT_RETURN_IF_ERROR(dkv_cols.CopyFrom(dkv_in, ctx.stream));
  ctx.DropSaved(this);
  return dqkv;
}

absl::StatusOr<int> SwapInRingAttention(Module& model, const std::shared_ptr<Ring>& ring) {
  std::vector<std::pair<Module*, std::string>> sites;
  for (Module* m : model.Modules()) {
    for (Module* c : m->children()) {
      if (dynamic_cast<CausalAttentionCore*>(c) != nullptr) sites.push_back({m, c->local_name()});
    }
  }
  for (auto& [parent, name] : sites) {
    const int64_t head_dim = static_cast<CausalAttentionCore*>(parent->child(name))->head_dim();
    absl::StatusOr<std::unique_ptr<Module>> replaced =
        parent->ReplaceChild(name, std::make_unique<RingAttention>(head_dim, ring));
    if (!replaced.ok()) return Annotate(replaced.status(), "swapping in ring attention");
  }
  return static_cast<int>(sites.size());
}

}  // namespace weft::cp
