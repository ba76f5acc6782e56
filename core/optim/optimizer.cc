#include "core/optim/optimizer.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/optim/f16_rounding.h"

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
  if (config.emulate_f16_params && device.is_cuda()) {
    return InvalidArgument("fp16 parameter emulation on CUDA", "a CPU (or meta) device",
                           "the emulation is for CPU kernels, which compute in f32 only");
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
    if (t.value.dtype() == DType::kF32 && !config.emulate_f16_params) {
      s.master = t.value.View(flat);
    } else {
      // Mixed precision: the update runs on an fp32 master copy and refreshes
      // the lower-precision parameter from it.
      WEFT_ASSIGN_OR_RETURN(s.master,
                            Tensor::Empty(flat, DType::kF32, device, state_allocator, stream));
      WEFT_RETURN_IF_ERROR(s.master.CopyFrom(t.value.View(flat), stream));
      s.param = t.value.View(flat);
      if (config.emulate_f16_params) WEFT_RETURN_IF_ERROR(opt->RoundParamToF16(s));
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

absl::Status Optimizer::KeepStepScalarsInMemory(Device device, Allocator* allocator,
                                                NativeStream stream) {
  const int64_t n = config_.name == "adamw" ? 3 : 1;
  WEFT_ASSIGN_OR_RETURN(staged_scalars_,
                        Tensor::Zeros({n}, DType::kF32, Device::Cpu(), PinnedHostAllocator()));
  WEFT_ASSIGN_OR_RETURN(step_scalars_, Tensor::Zeros({n}, DType::kF32, device, allocator, stream));
  return absl::OkStatus();
}

absl::Status Optimizer::StageStepScalars(float lr, int64_t step) {
  if (!staged_scalars_.defined()) {
    return FailedPrecondition("StageStepScalars before KeepStepScalarsInMemory",
                              "KeepStepScalarsInMemory first");
  }
  if (step < 1) return InvalidArgument(absl::StrCat("optimizer step ", step), "a 1-based step");
  float* host = staged_scalars_.data<float>();
  if (config_.name == "adamw") {
    const std::array<float, 3> k = AdamWStepScalars(lr, config_.beta1, config_.beta2, step);
    std::copy(k.begin(), k.end(), host);
  } else {
    host[0] = lr;
  }
  return absl::OkStatus();
}

absl::Status Optimizer::Step(const KernelContext& ctx, const StepArgs& a) {
  if (segments_.empty()) return absl::OkStatus();
  if (step_scalars_.defined()) {
    WEFT_RETURN_IF_ERROR(StageStepScalars(a.lr, a.step));
    WEFT_RETURN_IF_ERROR(step_scalars_.CopyFrom(staged_scalars_, ctx.stream, /*async=*/true));
  }
  if (config_.name == "adamw") {
    AdamWHyper h{.lr = a.lr,
                 .beta1 = config_.beta1,
                 .beta2 = config_.beta2,
                 .eps = config_.eps,
                 .weight_decay = config_.weight_decay,
                 .step = a.step,
                 .grad_scale = a.grad_scale,
                 .max_grad_norm = a.max_grad_norm,
                 .grad_norm_sq = a.grad_norm_sq,
                 .step_scalars = step_scalars_};
    WEFT_RETURN_IF_ERROR(ops_->AdamW(ctx, absl::MakeSpan(segments_), h));
    return RoundParamsToF16();
  }
  SgdHyper h{.lr = a.lr,
             .momentum = config_.momentum,
             .weight_decay = config_.weight_decay,
             .nesterov = config_.nesterov,
             .grad_scale = a.grad_scale,
             .max_grad_norm = a.max_grad_norm,
             .grad_norm_sq = a.grad_norm_sq,
             .step_scalars = step_scalars_};
  WEFT_RETURN_IF_ERROR(ops_->Sgd(ctx, absl::MakeSpan(segments_), h));
  return RoundParamsToF16();
}

absl::Status Optimizer::RefreshParamsFromMasters(NativeStream stream) {
  for (OptimSegment& s : segments_) {
    if (s.param.defined()) WEFT_RETURN_IF_ERROR(s.param.CopyFrom(s.master, stream));
  }
  return RoundParamsToF16();
}

absl::Status Optimizer::RoundParamToF16(OptimSegment& s) {
  // A value in f16 itself would already be rounded; only f32 ones emulate.
  if (!config_.emulate_f16_params || s.param.dtype() != DType::kF32) return absl::OkStatus();
  return RoundToF16InPlace(s.param);
}

absl::Status Optimizer::RoundParamsToF16() {
  if (!config_.emulate_f16_params) return absl::OkStatus();
  for (OptimSegment& s : segments_) WEFT_RETURN_IF_ERROR(RoundParamToF16(s));
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
