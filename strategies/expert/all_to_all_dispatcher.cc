#include "strategies/expert/all_to_all_dispatcher.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/kernels/moe_ops.h"

namespace weft {
namespace {

// Saved-entry tensor indexes: splits (2 * ep, host i64), the two orders.
enum { kSplits, kToLocal, kToReceived };

absl::StatusOr<Tensor> OnDevice(const RunContext& ctx, Tensor host) {
  if (ctx.device.is_cpu()) return host;
  return host.To(ctx.device, ctx.stream);
}

}  // namespace

AllToAllDispatcher::AllToAllDispatcher(std::shared_ptr<comm::ProcessGroup> group,
                                       int num_experts)
    : group_(std::move(group)),
      num_experts_(num_experts),
      local_experts_(num_experts / group_->size()) {}

absl::StatusOr<Tensor> AllToAllDispatcher::Dispatch(RunContext& ctx, const Tensor& x,
                                                    const std::vector<int64_t>& counts,
                                                    std::vector<int64_t>* local_counts) {
  const int ep = group_->size(), l = local_experts_;
  if (static_cast<int>(counts.size()) != num_experts_) {
    return InvalidArgument(absl::StrCat(counts.size(), " expert counts"),
                           absl::StrCat(num_experts_, " (one per global expert)"));
  }
  // 1. Sizes: send[p * L + j] = my rows for expert j of rank p.
  WEFT_ASSIGN_OR_RETURN(Tensor send_counts,
                        Tensor::FromVector<int64_t>(counts, {static_cast<int64_t>(ep) * l}));
  WEFT_ASSIGN_OR_RETURN(Tensor recv_counts, Tensor::Empty({static_cast<int64_t>(ep) * l},
                                                          DType::kI64, group_->device()));
  WEFT_ASSIGN_OR_RETURN(send_counts, OnDevice(ctx, send_counts));
  WEFT_RETURN_IF_ERROR(Annotate(
      group_->AllToAll(send_counts, recv_counts, {.stream = ctx.stream})->Wait(),
      "expert parallel: exchanging token counts"));
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> recv, recv_counts.ToVector<int64_t>());

  Plan plan;
  plan.send_splits.assign(ep, 0);
  plan.recv_splits.assign(ep, 0);
  local_counts->assign(l, 0);
  for (int p = 0; p < ep; ++p) {
    for (int j = 0; j < l; ++j) {
      plan.send_splits[p] += counts[p * l + j];
      plan.recv_splits[p] += recv[p * l + j];
      (*local_counts)[j] += recv[p * l + j];
    }
  }
  // 3. Received rows are (source p, expert j)-major; local order is (j, p).
  std::vector<int64_t> block_start(static_cast<size_t>(ep) * l);
  int64_t off = 0;
  for (int p = 0; p < ep; ++p) {
    for (int j = 0; j < l; ++j) {
      block_start[p * l + j] = off;
      off += recv[p * l + j];
    }
  }
  std::vector<int32_t> to_local, to_received(off);
  to_local.reserve(off);
  for (int j = 0; j < l; ++j) {
    for (int p = 0; p < ep; ++p) {
      for (int64_t r = 0; r < recv[p * l + j]; ++r) {
        const int64_t received = block_start[p * l + j] + r;
        to_received[received] = static_cast<int32_t>(to_local.size());
        to_local.push_back(static_cast<int32_t>(received));
      }
    }
  }
  WEFT_ASSIGN_OR_RETURN(plan.to_local, OnDevice(ctx, *Tensor::FromVector<int32_t>(to_local, {off})));
  WEFT_ASSIGN_OR_RETURN(plan.to_received,
                        OnDevice(ctx, *Tensor::FromVector<int32_t>(to_received, {off})));
  std::vector<int64_t> splits = plan.send_splits;
  splits.insert(splits.end(), plan.recv_splits.begin(), plan.recv_splits.end());
  SavedActivations& saved = ctx.Saved(this);
  WEFT_ASSIGN_OR_RETURN(saved[kSplits],
                        Tensor::FromVector<int64_t>(splits, {static_cast<int64_t>(splits.size())}));
  saved[kToLocal] = plan.to_local;
  saved[kToReceived] = plan.to_received;
  return Forward(ctx, plan, x);
}

absl::StatusOr<AllToAllDispatcher::Plan> AllToAllDispatcher::LoadPlan(RunContext& ctx) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr || !(*saved)[kSplits].defined()) {
    return FailedPrecondition("expert exchange without its Dispatch",
                              "Dispatch of this micro-batch before Combine and the backwards");
  }
  const std::vector<int64_t> splits = *(*saved)[kSplits].ToVector<int64_t>();
  const size_t ep = splits.size() / 2;
  Plan plan;
  plan.send_splits.assign(splits.begin(), splits.begin() + ep);
  plan.recv_splits.assign(splits.begin() + ep, splits.end());
  plan.to_local = (*saved)[kToLocal];
  plan.to_received = (*saved)[kToReceived];
  return plan;
}

absl::StatusOr<Tensor> AllToAllDispatcher::Forward(RunContext& ctx, const Plan& plan,
                                                   const Tensor& x) {
  const int64_t c = x.dim(-1);
  const int64_t received = std::accumulate(plan.recv_splits.begin(), plan.recv_splits.end(),
                                           int64_t{0});
  WEFT_ASSIGN_OR_RETURN(Tensor in, ctx.Empty({received, c}, x.dtype()));
  own_bytes_ += static_cast<int64_t>(x.nbytes());
  WEFT_RETURN_IF_ERROR(Annotate(group_->AllToAllV(x, plan.send_splits, in, plan.recv_splits,
                                                  {.stream = ctx.stream})
                                    ->Wait(),
                                "expert parallel: dispatching token rows"));
  WEFT_ASSIGN_OR_RETURN(MoeKernelOps * moe, GetMoeKernelOps(ctx.device.type));
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty({received, c}, x.dtype()));
  WEFT_RETURN_IF_ERROR(moe->GatherRows(ctx.kernel(), out, in, plan.to_local, 1, Tensor()));
  return out;
}

absl::StatusOr<Tensor> AllToAllDispatcher::Inverse(RunContext& ctx, const Plan& plan,
                                                   const Tensor& y) {
  const int64_t c = y.dim(-1);
  const int64_t sent = std::accumulate(plan.send_splits.begin(), plan.send_splits.end(),
                                       int64_t{0});
  WEFT_ASSIGN_OR_RETURN(MoeKernelOps * moe, GetMoeKernelOps(ctx.device.type));
  WEFT_ASSIGN_OR_RETURN(Tensor back, ctx.Empty({y.dim(0), c}, y.dtype()));
  WEFT_RETURN_IF_ERROR(moe->GatherRows(ctx.kernel(), back, y, plan.to_received, 1, Tensor()));
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty({sent, c}, y.dtype()));
  expert_bytes_ += static_cast<int64_t>(back.nbytes());
  WEFT_RETURN_IF_ERROR(Annotate(group_->AllToAllV(back, plan.recv_splits, out, plan.send_splits,
                                                  {.stream = ctx.stream})
                                    ->Wait(),
                                "expert parallel: returning expert outputs"));
  return out;
}

absl::StatusOr<Tensor> AllToAllDispatcher::Combine(RunContext& ctx, const Tensor& y) {
  WEFT_ASSIGN_OR_RETURN(Plan plan, LoadPlan(ctx));
  if (!ctx.training) ctx.DropSaved(this);  // no backward will need it
  return Inverse(ctx, plan, y);
}

absl::StatusOr<Tensor> AllToAllDispatcher::CombineBackward(RunContext& ctx, const Tensor& dy) {
  WEFT_ASSIGN_OR_RETURN(Plan plan, LoadPlan(ctx));
  return Forward(ctx, plan, dy);
}

absl::StatusOr<Tensor> AllToAllDispatcher::DispatchBackward(RunContext& ctx, const Tensor& dx) {
  WEFT_ASSIGN_OR_RETURN(Plan plan, LoadPlan(ctx));
  ctx.DropSaved(this);
  return Inverse(ctx, plan, dx);
}

}  // namespace weft
