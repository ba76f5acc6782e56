#include "strategies/expert/all_to_all_dispatcher.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {
namespace {

// Saved-entry tensor index: the splits (2 * ep, host i64).
enum { kSplits };

absl::StatusOr<Tensor> OnDevice(const RunContext& ctx, Tensor host) {
  if (ctx.device.is_cpu()) return host;
  return host.To(ctx.device, ctx.stream);
}

int64_t Sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

// Row offset of each block of `splits`, and the total.
std::vector<int64_t> Offsets(const std::vector<int64_t>& splits) {
  std::vector<int64_t> off(splits.size() + 1, 0);
  for (size_t i = 0; i < splits.size(); ++i) off[i + 1] = off[i] + splits[i];
  return off;
}

}  // namespace

AllToAllDispatcher::AllToAllDispatcher(std::shared_ptr<comm::ProcessGroup> group,
                                       int num_experts, bool overlap)
    : group_(std::move(group)),
      num_experts_(num_experts),
      local_experts_(num_experts / group_->size()),
      overlap_(overlap) {}

absl::StatusOr<Tensor> AllToAllDispatcher::ExchangeAndCompute(
    RunContext& ctx, const Splits& splits, const Tensor& rows, const char* what,
    const std::function<absl::StatusOr<Tensor>(const Tensor&, const std::vector<int>&,
                                               const ExpertMlps::RowSource&)>& compute) {
  const int ep = group_->size(), me = group_->rank();
  const std::vector<int64_t> sent_at = Offsets(splits.send), recv_at = Offsets(splits.recv);
  WEFT_ASSIGN_OR_RETURN(Tensor received, ctx.Empty({recv_at.back(), rows.dim(-1)}, rows.dtype()));
  own_bytes_ += static_cast<int64_t>(rows.nbytes());
  std::shared_ptr<comm::Work> work =
      group_->AllToAllV(rows, splits.send, received, splits.recv, {.stream = ctx.stream});
  bool arrived = false;
  auto wait = [&]() -> absl::Status {
    if (arrived) return absl::OkStatus();
    arrived = true;
    const absl::Time start = absl::Now();
    absl::Status st = Annotate(work->Wait(), what);
    wait_ms_ += absl::ToDoubleMilliseconds(absl::Now() - start);
    return st;
  };
  // The own run first: its rows are this rank's block of `rows`.
  std::vector<int> order;
  if (overlap_) order.push_back(me);
  for (int p = 0; p < ep; ++p) {
    if (!overlap_ || p != me) order.push_back(p);
  }
  absl::StatusOr<Tensor> out = compute(received, order, [&](int run) -> absl::StatusOr<Tensor> {
    if (overlap_ && run == me) return rows.Slice(0, sent_at[me], sent_at[me + 1]);
    WEFT_RETURN_IF_ERROR(wait());
    return received.Slice(0, recv_at[run], recv_at[run + 1]);
  });
  // Never leave the exchange behind, even when the experts failed.
  const absl::Status done = wait();
  if (!out.ok()) return out.status();
  WEFT_RETURN_IF_ERROR(done);
  return out;
}

absl::StatusOr<Tensor> AllToAllDispatcher::Return(RunContext& ctx, const Splits& splits,
                                                  const Tensor& y, const char* what) {
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty({Sum(splits.send), y.dim(-1)}, y.dtype()));
  expert_bytes_ += static_cast<int64_t>(y.nbytes());
  WEFT_RETURN_IF_ERROR(Annotate(
      group_->AllToAllV(y, splits.recv, out, splits.send, {.stream = ctx.stream})->Wait(), what));
  return out;
}

absl::StatusOr<Tensor> AllToAllDispatcher::Forward(RunContext& ctx, const Tensor& x,
                                                   const std::vector<int64_t>& counts,
                                                   ExpertMlps& experts) {
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
  // recv[p * L + j]: rows from rank p for local expert j, i.e. run p's counts.
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> recv, recv_counts.ToVector<int64_t>());
  if (ctx.device.is_meta()) {
    // A dry run's collectives carry no values, and its routing is the same
    // round-robin on every rank (core/nn/moe.h): each rank sends this one
    // what this one routes to its own experts.
    const int me = group_->rank();
    for (int p = 0; p < ep; ++p) {
      for (int j = 0; j < l; ++j) recv[p * l + j] = counts[me * l + j];
    }
  }

  Splits splits{std::vector<int64_t>(ep, 0), std::vector<int64_t>(ep, 0)};
  for (int p = 0; p < ep; ++p) {
    for (int j = 0; j < l; ++j) {
      splits.send[p] += counts[p * l + j];
      splits.recv[p] += recv[p * l + j];
    }
  }
  if (ctx.training) {
    std::vector<int64_t> both = splits.send;
    both.insert(both.end(), splits.recv.begin(), splits.recv.end());
    WEFT_ASSIGN_OR_RETURN(ctx.Saved(this)[kSplits], Tensor::FromVector<int64_t>(
                                                        both, {static_cast<int64_t>(both.size())}));
  }
  // 2.-3. Rows to the experts' ranks, through the experts.
  WEFT_ASSIGN_OR_RETURN(
      Tensor y, ExchangeAndCompute(ctx, splits, x, "expert parallel: dispatching token rows",
                                   [&](const Tensor& received, const std::vector<int>& order,
                                       const ExpertMlps::RowSource& source) {
                                     return experts.ForwardRuns(ctx, received, recv, order,
                                                                source);
                                   }));
  // 4. Outputs back.
  return Return(ctx, splits, y, "expert parallel: returning expert outputs");
}

absl::StatusOr<Tensor> AllToAllDispatcher::Backward(RunContext& ctx, const Tensor& dy,
                                                    ExpertMlps& experts) {
  SavedActivations* saved = ctx.FindSaved(this);
  if (saved == nullptr || !(*saved)[kSplits].defined()) {
    return FailedPrecondition("expert exchange backward without its forward",
                              "Forward of this micro-batch in training mode before Backward");
  }
  const std::vector<int64_t> both = *(*saved)[kSplits].ToVector<int64_t>();
  ctx.DropSaved(this);
  const size_t ep = both.size() / 2;
  const Splits splits{std::vector<int64_t>(both.begin(), both.begin() + ep),
                      std::vector<int64_t>(both.begin() + ep, both.end())};
  // Output gradients travel like the rows did; the experts' backward runs
  // on them; input gradients travel back like the outputs.
  WEFT_ASSIGN_OR_RETURN(
      Tensor dx,
      ExchangeAndCompute(ctx, splits, dy, "expert parallel: dispatching output gradients",
                         [&](const Tensor&, const std::vector<int>& order,
                             const ExpertMlps::RowSource& source) {
                           return experts.BackwardRuns(ctx, order, source);
                         }));
  return Return(ctx, splits, dx, "expert parallel: returning input gradients");
}

}  // namespace weft
