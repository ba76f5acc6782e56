#include "strategies/dp/data_parallel_model.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"

namespace weft {
namespace {

// Runs fn(i) for every replica with work, each on its own thread, and
// returns the first error in replica order.
absl::Status RunParallel(std::vector<DataParallelModel::Replica>& replicas,
                         const std::function<absl::Status(size_t)>& fn) {
  std::vector<absl::Status> status(replicas.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].rows == 0) continue;
    threads.emplace_back([&, i] { status[i] = fn(i); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < status.size(); ++i) {
    if (!status[i].ok()) return Annotate(status[i], absl::StrCat("dp replica ", i));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataParallelModel>> DataParallelModel::Create(
    std::unique_ptr<Model> master, std::vector<Device> devices, const RunContext& ctx,
    DType grad_dtype) {
  Model* raw = master.get();
  auto dp = std::unique_ptr<DataParallelModel>(new DataParallelModel(raw));
  // The master keeps its parameter names: it sits under an empty name.
  dp->RegisterModule("", std::move(master));
  for (size_t i = 0; i < devices.size(); ++i) {
    Replica r;
    WEFT_ASSIGN_OR_RETURN(r.ctx, RunContext::Create(devices[i], ctx.compute_dtype,
                                                    i == 0 ? ctx.stream : nullptr));
    if (i > 0) {
      WEFT_ASSIGN_OR_RETURN(r.model, raw->CloneArchitecture());
      WEFT_RETURN_IF_ERROR(MaterializeParameters(*r.model, {.device = devices[i],
                                                            .param_dtype = ctx.compute_dtype,
                                                            .grad_dtype = grad_dtype}));
    }
    dp->replicas_.push_back(std::move(r));
  }
  return dp;
}

std::string DataParallelModel::Summary() const {
  return absl::StrCat(master_->Summary(), " x ", replicas_.size(), " dp replicas");
}

absl::Status DataParallelModel::Replicate() {
  std::vector<Parameter*> src = master_->Parameters();
  for (size_t i = 1; i < replicas_.size(); ++i) {
    std::vector<Parameter*> dst = replicas_[i].model->Parameters();
    for (size_t k = 0; k < src.size(); ++k) {
      WEFT_RETURN_IF_ERROR(dst[k]->value.CopyFrom(src[k]->value));
    }
    WEFT_RETURN_IF_ERROR(ZeroGrads(*replicas_[i].model));
  }
  return absl::OkStatus();
}

absl::Status DataParallelModel::Scatter(const Tensor& inputs, const Tensor& targets) {
  const int64_t rows = inputs.dim(0);
  const int64_t n = static_cast<int64_t>(replicas_.size());
  const int64_t chunk = (rows + n - 1) / n;
  for (int64_t i = 0; i < n; ++i) {
    Replica& r = replicas_[i];
    const int64_t lo = std::min(rows, i * chunk), hi = std::min(rows, lo + chunk);
    r.rows = hi - lo;
    r.first_row = lo;
    if (r.rows == 0) continue;
    WEFT_ASSIGN_OR_RETURN(r.inputs, inputs.Slice(0, lo, hi).To(r.ctx.device));
    WEFT_ASSIGN_OR_RETURN(r.targets, targets.Slice(0, lo, hi).To(r.ctx.device));
  }
  return absl::OkStatus();
}

// A replica works on the trainer's micro-batch slot; its rows are samples
// first_row.. of the micro-batch, so it draws their single-device dropout
// masks.
void DataParallelModel::FollowMicroBatch(const RunContext& ctx, size_t replica,
                                         RunContext& replica_ctx) const {
  replica_ctx.slot = ctx.slot;
  replica_ctx.dropout_seed = ctx.dropout_seed;
  replica_ctx.samples = {
      .first = ctx.samples.first +
               ctx.samples.stride * static_cast<uint64_t>(replicas_[replica].first_row),
      .stride = ctx.samples.stride};
}

absl::StatusOr<Tensor> DataParallelModel::ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                                      const Tensor& targets, float dloss_scale) {
  WEFT_RETURN_IF_ERROR(Replicate());
  WEFT_RETURN_IF_ERROR(Scatter(inputs, targets));
  std::vector<Tensor> losses(replicas_.size());
  WEFT_RETURN_IF_ERROR(RunParallel(replicas_, [&](size_t i) -> absl::Status {
    Replica& r = replicas_[i];
    r.ctx.training = ctx.training;
    FollowMicroBatch(ctx, i, r.ctx);
    WEFT_ASSIGN_OR_RETURN(losses[i],
                          ReplicaModel(i).ForwardLoss(r.ctx, r.inputs, r.targets, dloss_scale));
    return absl::OkStatus();
  }));
  // Gather: losses of all replicas, in batch order, on the master device.
  int64_t total = 0;
  for (const Tensor& l : losses) total += l.defined() ? l.numel() : 0;
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.Empty({total}, DType::kF32));
  int64_t off = 0;
  for (const Tensor& l : losses) {
    if (!l.defined()) continue;
    Tensor dst = out.Slice(0, off, off + l.numel());
    WEFT_RETURN_IF_ERROR(dst.CopyFrom(l, ctx.stream));
    off += l.numel();
  }
  return out;
}

absl::Status DataParallelModel::BackwardFromLoss(RunContext& ctx) {
  WEFT_RETURN_IF_ERROR(RunParallel(replicas_, [&](size_t i) {
    FollowMicroBatch(ctx, i, replicas_[i].ctx);
    return ReplicaModel(i).BackwardFromLoss(replicas_[i].ctx);
  }));
  return ReduceGradients(ctx);
}

absl::Status DataParallelModel::ReduceGradients(RunContext& ctx) {
  std::vector<Parameter*> master = master_->Parameters();
  for (size_t i = 1; i < replicas_.size(); ++i) {
    if (replicas_[i].rows == 0) continue;
    std::vector<Parameter*> rp = replicas_[i].model->Parameters();
    for (size_t k = 0; k < master.size(); ++k) {
      Tensor g = rp[k]->grad;
      if (g.device() != ctx.device) {
        WEFT_ASSIGN_OR_RETURN(g, g.To(ctx.device, ctx.stream));
      }
      WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), master[k]->grad, master[k]->grad, g));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DataParallelModel::Forward(RunContext& ctx, const Tensor& x) {
  // Inference goes through the master alone (e.g. accuracy evaluation).
  return master_->CallForward(ctx, x);
}

absl::StatusOr<Tensor> DataParallelModel::Backward(RunContext&, const Tensor&) {
  return FailedPrecondition("DataParallelModel::Backward", "BackwardFromLoss after ForwardLoss");
}

}  // namespace weft
