#include "core/optim/optimizer.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerConfig& config,
                                                             std::vector<OptimTarget> targets,
                                                             Device device,
                                                             Allocator* state_allocator,
                                                             NativeStream stream) {
  const bool adam = config.name == "adamw";
  if (!adam && config.name != "sgd") {
    return InvalidArgument(absl::StrCat("optimizer '", config.name, "'"), "adamw or sgd");
  }
  WEFT_ASSIGN_OR_RETURN(KernelOps * ops, GetKernelOps(device.type));
  auto opt = std::unique_ptr<Optimizer>(new Optimizer(config, std::move(targets), ops));
  for (OptimTarget& t : opt->targets_) {
    if (t.value.numel() != t.grad.numel()) {
      return InvalidArgument(absl::StrCat("optimizer target ", t.name, ": value has ",
                                          t.value.numel(), " elements, grad ", t.grad.numel()),
                             "equal sizes");
    }
    OptimSegment s;
    s.weight_decay = t.weight_decay;
    const Shape flat = {t.value.numel()};
    if (t.value.dtype() == DType::kF32) {
      s.master = t.value.View(flat);
    } else {
      // Mixed precision: the update runs on an fp32 master copy and refreshes
      // the lower-precision parameter from it.
      WEFT_ASSIGN_OR_RETURN(s.master,
                            Tensor::Empty(flat, DType::kF32, device, state_allocator, stream));
      WEFT_RETURN_IF_ERROR(s.master.CopyFrom(t.value.View(flat), stream));
      s.param = t.value.View(flat);
    }
    s.grad = t.grad.View(flat);
    WEFT_ASSIGN_OR_RETURN(s.exp_avg,
                          Tensor::Zeros(flat, DType::kF32, device, state_allocator, stream));
    if (adam) {
      WEFT_ASSIGN_OR_RETURN(s.exp_avg_sq,
                            Tensor::Zeros(flat, DType::kF32, device, state_allocator, stream));
    }
    opt->segments_.push_back(std::move(s));
  }
  return opt;
}

absl::Status Optimizer::Step(const KernelContext& ctx, const StepArgs& a) {
  if (segments_.empty()) return absl::OkStatus();
  if (config_.name == "adamw") {
    AdamWHyper h{.lr = a.lr,
                 .beta1 = config_.beta1,
                 .beta2 = config_.beta2,
                 .eps = config_.eps,
                 .weight_decay = config_.weight_decay,
                 .step = a.step,
                 .grad_scale = a.grad_scale,
                 .max_grad_norm = a.max_grad_norm,
                 .grad_norm_sq = a.grad_norm_sq};
    return ops_->AdamW(ctx, absl::MakeSpan(segments_), h);
  }
  SgdHyper h{.lr = a.lr,
             .momentum = config_.momentum,
             .weight_decay = config_.weight_decay,
             .nesterov = config_.nesterov,
             .grad_scale = a.grad_scale,
             .max_grad_norm = a.max_grad_norm,
             .grad_norm_sq = a.grad_norm_sq};
  return ops_->Sgd(ctx, absl::MakeSpan(segments_), h);
}

absl::Status Optimizer::RefreshParamsFromMasters(NativeStream stream) {
  for (OptimSegment& s : segments_) {
    if (s.param.defined()) WEFT_RETURN_IF_ERROR(s.param.CopyFrom(s.master, stream));
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, Tensor>> Optimizer::TargetState(size_t i) const {
  std::vector<std::pair<std::string, Tensor>> out;
  if (segments_[i].param.defined()) out.push_back({"master", segments_[i].master});
  out.push_back({"exp_avg", segments_[i].exp_avg});
  if (segments_[i].exp_avg_sq.defined()) out.push_back({"exp_avg_sq", segments_[i].exp_avg_sq});
  return out;
}

std::vector<std::pair<std::string, Tensor>> Optimizer::StateTensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < segments_.size(); ++i) {
    for (auto& [kind, t] : TargetState(i)) out.push_back({targets_[i].name + "." + kind, t});
  }
  return out;
}

int64_t Optimizer::StateBytes() const {
  int64_t bytes = 0;
  for (const auto& [n, t] : StateTensors()) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

}  // namespace weft
