#include "core/nn/materialize.h"

#include "core/base/status_macros.h"
#include "core/kernels/kernel_ops.h"

namespace weft {

absl::StatusOr<Tensor> InitialValue(const Parameter& param, uint64_t seed) {
  WEFT_ASSIGN_OR_RETURN(Tensor host, Tensor::Empty(param.shape(), DType::kF32));
  WEFT_RETURN_IF_ERROR(InitLocalValue(param, seed, host));
  return host;
}

absl::Status MaterializeParameters(Module& root, const MaterializeOptions& o) {
  for (Parameter* p : root.Parameters()) {
    if (o.device.is_meta()) {
      // Shapes only (a memory dry run): the same allocations, no values.
      WEFT_ASSIGN_OR_RETURN(p->value, Tensor::Empty(p->shape(), o.param_dtype, o.device,
                                                    o.allocator, o.stream));
      if (o.allocate_grads) {
        WEFT_ASSIGN_OR_RETURN(
            p->grad, Tensor::Empty(p->shape(), o.grad_dtype, o.device,
                                   o.grad_allocator ? o.grad_allocator : o.allocator, o.stream));
      }
      continue;
    }
    if (o.device.is_cpu() && o.param_dtype == DType::kF32) {
      // The value is the f32 host tensor the initializer fills: fill it in
      // place rather than through a staging copy, which would hold each
      // parameter twice while building (and a dry run, which computes no
      // values, would not see that transient).
      WEFT_ASSIGN_OR_RETURN(p->value, Tensor::Empty(p->shape(), DType::kF32, o.device,
                                                    o.allocator, o.stream));
      WEFT_RETURN_IF_ERROR(InitLocalValue(*p, o.seed, p->value));
    } else {
      WEFT_ASSIGN_OR_RETURN(Tensor host, InitialValue(*p, o.seed));
      if (o.param_dtype != DType::kF32) {
        WEFT_ASSIGN_OR_RETURN(host, host.ToDType(o.param_dtype));
      }
      WEFT_ASSIGN_OR_RETURN(p->value, Tensor::Empty(p->shape(), o.param_dtype, o.device,
                                                    o.allocator, o.stream));
      WEFT_RETURN_IF_ERROR(p->value.CopyFrom(host, o.stream));
    }
    if (o.allocate_grads) {
      WEFT_ASSIGN_OR_RETURN(
          p->grad, Tensor::Zeros(p->shape(), o.grad_dtype, o.device,
                                 o.grad_allocator ? o.grad_allocator : o.allocator, o.stream));
    }
  }
  return absl::OkStatus();
}

absl::Status AdoptBox(Parameter& p, const Tensor& held, absl::Span<const int64_t> held_at,
                      DType grad_dtype, const ReplaceOptions& o) {
  Tensor box = held;
  for (size_t d = 0; d < p.shape().size(); ++d) {
    const int64_t off = p.local_offsets()[d] - held_at[d];
    box = box.Slice(static_cast<int>(d), off, off + p.box_shape()[d]);
  }
  const bool padded = p.box_shape() != p.shape();
  WEFT_ASSIGN_OR_RETURN(p.value, (padded ? Tensor::Zeros : Tensor::Empty)(
                                     p.shape(), held.dtype(), held.device(),
                                     o.param_allocator, o.stream));
  Tensor dst = p.value;
  for (size_t d = 0; padded && d < p.shape().size(); ++d) {
    dst = dst.Slice(static_cast<int>(d), 0, p.box_shape()[d]);
  }
  WEFT_RETURN_IF_ERROR(dst.CopyFrom(box, o.stream));
  WEFT_ASSIGN_OR_RETURN(p.grad, Tensor::Zeros(p.shape(), grad_dtype, held.device(),
                                              o.grad_allocator, o.stream));
  return absl::OkStatus();
}

absl::Status ZeroGrads(Module& root, NativeStream stream) {
  std::vector<Tensor> grads;
  for (Parameter* p : root.Parameters()) {
    if (p->grad.defined()) grads.push_back(p->grad);
  }
  if (grads.empty()) return absl::OkStatus();
  const Device device = grads[0].device();
  WEFT_ASSIGN_OR_RETURN(KernelOps * ops, GetKernelOps(device.type));
  return ops->ZeroTensors(KernelContext{device, stream}, grads);
}

}  // namespace weft
