// Optimizer: owns per-tensor state (fp32 master weights when the parameter
// is lower precision, moments) for a list of update targets, and applies one
// fused multi-tensor update per step through KernelOps.
//
// Targets are whatever a strategy says this rank updates: whole parameters
// for ddp (named like the parameter), and for zero/fsdp the part of each
// parameter inside this rank's flat shard (named "<param>[lo:hi]", element
// offsets into the parameter). The optimizer never communicates.
#ifndef WEFT_CORE_OPTIM_OPTIMIZER_H_
#define WEFT_CORE_OPTIM_OPTIMIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/kernels/kernel_ops.h"
#include "core/tensor/tensor.h"

namespace weft {

class Parameter;  // core/nn; only pointed to here

// One tensor the optimizer updates: a whole parameter, or a contiguous
// range of one (a zero/fsdp shard holds one target per parameter it
// overlaps).
struct OptimTarget {
  std::string name;   // for logs: "blocks.0.attn.qkv.weight" or "...weight[0:512]"
  Tensor value;       // updated in place; f32 or bf16
  Tensor grad;        // same numel
  bool weight_decay = true;
  // Where the target sits, for the sharding export: elements
  // [param_offset, param_offset + value.numel()) of `param`'s local tensor
  // in row-major order. `replica` numbers the ranks that hold this same
  // range (0 on exactly one of them).
  Parameter* param = nullptr;
  int64_t param_offset = 0;
  int replica = 0;
};

struct OptimizerConfig {
  std::string name = "adamw";  // adamw | sgd
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float momentum = 0.9f;  // sgd
  bool nesterov = false;  // sgd
  // fp16 storage emulated on CPU (--dtype=fp16, f16_rounding.h): f32
  // targets get an f32 master of their own, like lower-precision ones, and
  // after every update (and RefreshParamsFromMasters) the target's value
  // holds its master rounded to the nearest fp16 value. Create rounds the
  // values once, so the first forward already computes with fp16 weights.
  // CPU (and meta, for dry runs) only.
  bool emulate_f16_params = false;
};

struct StepArgs {
  float lr = 0.f;
  int64_t step = 1;          // 1-based
  float grad_scale = 1.f;    // multiplies every gradient
  float max_grad_norm = 0.f; // 0: no clipping
  Tensor grad_norm_sq;       // one f32 on the device, needed when clipping
};

class Optimizer {
 public:
  static absl::StatusOr<std::unique_ptr<Optimizer>> Create(const OptimizerConfig& config,
                                                           std::vector<OptimTarget> targets,
                                                           Device device,
                                                           Allocator* state_allocator,
                                                           NativeStream stream);

  absl::Status Step(const KernelContext& ctx, const StepArgs& args);
  // A replayed CUDA graph keeps its kernels' arguments, so the per-step lr
  // and bias corrections must come from memory. After this call each Step
  // writes them to a pinned host buffer (StageStepScalars) and copies that
  // to `device` on its stream, where the update reads them; a captured
  // Step captures the copy, so staging before each replay is all a replay
  // needs. Staging must wait until the previous step's copy ran (the
  // trainer synchronizes once per step).
  absl::Status KeepStepScalarsInMemory(Device device, Allocator* allocator,
                                       NativeStream stream);
  absl::Status StageStepScalars(float lr, int64_t step);

  // Sets every lower-precision parameter from its fp32 master (rounding to
  // nearest even, as the update does): after the masters were loaded from a
  // checkpoint.
  absl::Status RefreshParamsFromMasters(NativeStream stream);

  // Named state tensors for checkpoints: "<target>.master|exp_avg|exp_avg_sq".
  std::vector<std::pair<std::string, Tensor>> StateTensors() const;
  // Target i's state by kind: "master" (f32 copy of a lower-precision
  // value), "exp_avg", "exp_avg_sq" (AdamW) or "exp_avg" (SGD momentum).
  std::vector<std::pair<std::string, Tensor>> TargetState(size_t i) const;
  // Bytes of optimizer state (masters that are copies, moments).
  int64_t StateBytes() const;
  const std::vector<OptimTarget>& targets() const { return targets_; }
  const OptimizerConfig& config() const { return config_; }

 private:
  Optimizer(OptimizerConfig config, std::vector<OptimTarget> targets, KernelOps* ops)
      : config_(std::move(config)), targets_(std::move(targets)), ops_(ops) {}
  // emulate_f16_params: the compute copies to their nearest fp16 values.
  absl::Status RoundParamToF16(OptimSegment& s);
  absl::Status RoundParamsToF16();

  OptimizerConfig config_;
  std::vector<OptimTarget> targets_;
  std::vector<OptimSegment> segments_;
  KernelOps* ops_;
  Tensor staged_scalars_;  // pinned host: [lr, 1 - beta1^t, 1 - beta2^t] or [lr]
  Tensor step_scalars_;    // the device copy the update reads
};

}  // namespace weft

#endif  // WEFT_CORE_OPTIM_OPTIMIZER_H_
