// RunContext: everything a Forward or Backward call needs that is not a
// tensor: where to run (device, stream, kernels), in which precision, and
// whether this is training (dropout on) or evaluation.
#ifndef WEFT_CORE_NN_RUN_CONTEXT_H_
#define WEFT_CORE_NN_RUN_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "core/kernels/kernel_ops.h"
#include "core/nn/activation_store.h"
#include "core/tensor/tensor.h"

namespace weft {

struct RunContext {
  Device device = Device::Cpu();
  NativeStream stream = nullptr;
  KernelOps* ops = nullptr;
  DType compute_dtype = DType::kF32;  // activations and forward weights
  bool training = true;
  // True while a Recompute re-runs its module's forward just before that
  // module's backward: hooks must not prefetch later modules (their backward
  // is done) or free what the imminent backward needs.
  bool recomputing = false;
  // A dry run (meta device) routes each MoE choice round-robin over every
  // expert, the balanced case; with this set, over the rank's own experts
  // only: the most rows expert parallelism can bring to one rank (every
  // rank's choices, at most each expert's capacity), a bound for budgets.
  bool meta_moe_routing_bound = false;
  // Dropout masks are Philox keyed by dropout_seed and the module (see
  // core/nn/dropout.h); the runtime changes the seed every step.
  uint64_t dropout_seed = 0;
  // When defined, one i64 on the device holding the step's seed, which
  // the dropout kernels read when they run (a replayed CUDA graph);
  // dropout_seed is then not used.
  Tensor dropout_seed_in_memory;
  // Where this micro-batch's samples (the first dimension of the model's
  // inputs) sit in the step's global batch: sample b is sample
  // first + stride * b. Dropout draws each sample's mask from its place in
  // the global batch, so masks do not depend on how that batch was split
  // over data-parallel ranks and micro-batches.
  struct Samples {
    uint64_t first = 0;
    uint64_t stride = 1;
  };
  Samples samples;
  // The scale of the current loss (Model::ForwardLoss's dloss_scale): layers
  // with auxiliary losses (MoE balance, z-loss) weight their gradients by it
  // so those losses average like the task loss.
  float dloss_scale = 1.0f;
  Allocator* allocator = nullptr;  // activations; nullptr = device default
  // Kernels' scratch (KernelContext::allocator); nullptr = device default.
  // Apart from `allocator`, so an eager run's activation tracking counts
  // activations only; a captured CUDA graph's step sets both to the graph's.
  Allocator* scratch_allocator = nullptr;
  // Saved activations, per micro-batch slot; `slot` is the micro-batch the
  // current Forward/Backward belongs to (set by the step schedule). Copies
  // of a context share the store.
  std::shared_ptr<ActivationStore> activations;
  int slot = 0;
  // Zero-bubble pipelines split a backward into B and W: while true, layers
  // queue their weight-gradient GEMMs in the slot (ActivationStore::Defer)
  // instead of running them; the schedule's W runs them.
  bool defer_weight_grads = false;
  // Set when this rank holds only chunks of each sequence (context
  // parallelism): where its tokens sit globally, for position embeddings
  // and causal masks. Unset: the tokens are the whole sequence, 0..T-1.
  std::optional<TokenChunks> sequence;
  // Set while a pipeline runs one of its chunks: stages [first, last) of the
  // root model's Stages(). After them the rank runs whatever its schedule
  // says next, not the next stage, so hooks that prefetch the modules that
  // run next (fsdp, zero-3) stay inside the range. Unset: the whole model.
  struct StageRange {
    int first = 0, last = 0;
  };
  std::optional<StageRange> stage_range;

  // The store, created on first use.
  ActivationStore& store();
  // `owner`'s entry in the current slot.
  SavedActivations& Saved(const void* owner) { return store().Get(owner, slot); }
  SavedActivations* FindSaved(const void* owner) { return store().Find(owner, slot); }
  void DropSaved(const void* owner) { store().Drop(owner, slot); }

  // A context for `device` with its registered kernels.
  static absl::StatusOr<RunContext> Create(Device device, DType compute_dtype,
                                           NativeStream stream = nullptr);

  KernelContext kernel() const { return KernelContext{device, stream, scratch_allocator}; }
  // Activation tensors on this device, ordered on this stream.
  absl::StatusOr<Tensor> Empty(Shape shape, DType dtype) const;
  absl::StatusOr<Tensor> Zeros(Shape shape, DType dtype) const;
};

// Sets ctx.sequence for the life of the scope and restores the previous
// value after: whoever runs a model's stages on part of each sequence (the
// cp wrapper, a pipeline's chunks) sets it around every forward and
// backward of those stages, on every return path.
class SequenceScope {
 public:
  SequenceScope(RunContext& ctx, const std::optional<TokenChunks>& sequence)
      : ctx_(ctx), saved_(ctx.sequence) {
    ctx_.sequence = sequence;
  }
  ~SequenceScope() { ctx_.sequence = saved_; }
  SequenceScope(const SequenceScope&) = delete;
  SequenceScope& operator=(const SequenceScope&) = delete;

 private:
  RunContext& ctx_;
  std::optional<TokenChunks> saved_;
};

// Sets ctx.stage_range for the life of the scope and restores the previous
// value after, on every return path.
class StageRangeScope {
 public:
  StageRangeScope(RunContext& ctx, RunContext::StageRange range)
      : ctx_(ctx), saved_(ctx.stage_range) {
    ctx_.stage_range = range;
  }
  ~StageRangeScope() { ctx_.stage_range = saved_; }
  StageRangeScope(const StageRangeScope&) = delete;
  StageRangeScope& operator=(const StageRangeScope&) = delete;

 private:
  RunContext& ctx_;
  std::optional<RunContext::StageRange> saved_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_RUN_CONTEXT_H_
