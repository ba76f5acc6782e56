// Allocates and initializes a module tree's parameters on a device.
// Models are built with shapes only; the runtime materializes them once the
// device, dtypes and any sharding decisions are known.
#ifndef WEFT_CORE_NN_MATERIALIZE_H_
#define WEFT_CORE_NN_MATERIALIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/nn/module.h"

namespace weft {

struct MaterializeOptions {
  Device device = Device::Cpu();
  DType param_dtype = DType::kF32;  // Parameter::value
  DType grad_dtype = DType::kF32;   // Parameter::grad
  uint64_t seed = 0;
  Allocator* allocator = nullptr;   // values; nullptr: the device default
  Allocator* grad_allocator = nullptr;  // gradients; nullptr: same as values
  NativeStream stream = nullptr;
  bool allocate_grads = true;
};

// value = init(seed, name) converted to param_dtype; grad = zeros when
// allocate_grads (otherwise grad stays undefined, e.g. for a strategy that
// owns gradient storage).
absl::Status MaterializeParameters(Module& root, const MaterializeOptions& options);

// This rank's piece of a parameter's initial value (its local shape; the
// whole value when it is not sharded) as an f32 CPU tensor.
absl::StatusOr<Tensor> InitialValue(const Parameter& param, uint64_t seed);

// Where a parameter's new tensors go when a strategy re-places it after
// materialization.
struct ReplaceOptions {
  NativeStream stream = nullptr;
  Allocator* param_allocator = nullptr;  // values; nullptr: the device default
  Allocator* grad_allocator = nullptr;   // gradients; nullptr: the device default
};

// A strategy sharded `p` (its placement is set) after it was materialized:
// p.value becomes a copy of its box cut from `held`, values on p's device
// whose element [0, ...] sits at global offsets `held_at` and which cover
// the box; rows past the box (a padded shard) are zero. p.grad becomes
// zeros of `grad_dtype`.
absl::Status AdoptBox(Parameter& p, const Tensor& held, absl::Span<const int64_t> held_at,
                      DType grad_dtype, const ReplaceOptions& options);

// Zeroes every defined gradient in the tree.
absl::Status ZeroGrads(Module& root, NativeStream stream = nullptr);

}  // namespace weft

#endif  // WEFT_CORE_NN_MATERIALIZE_H_
