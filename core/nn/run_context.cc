#include "core/nn/run_context.h"

#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<RunContext> RunContext::Create(Device device, DType compute_dtype,
                                              NativeStream stream) {
  RunContext ctx;
  ctx.device = device;
  ctx.stream = stream;
  ctx.compute_dtype = compute_dtype;
  WEFT_ASSIGN_OR_RETURN(ctx.ops, GetKernelOps(device.type));
  ctx.activations = std::make_shared<ActivationStore>();
  return ctx;
}

ActivationStore& RunContext::store() {
  if (activations == nullptr) activations = std::make_shared<ActivationStore>();
  return *activations;
}

absl::StatusOr<Tensor> RunContext::Empty(Shape shape, DType dtype) const {
  return Tensor::Empty(std::move(shape), dtype, device, allocator, stream);
}

absl::StatusOr<Tensor> RunContext::Zeros(Shape shape, DType dtype) const {
  return Tensor::Zeros(std::move(shape), dtype, device, allocator, stream);
}

}  // namespace weft
