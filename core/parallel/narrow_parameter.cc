#include "core/parallel/narrow_parameter.h"

#include "core/base/status_macros.h"

namespace weft {

absl::Status NarrowParameter(Parameter& p, const std::string& axis, int dim, int index,
                             int count, StrategyContext& ctx) {
  const Tensor held = p.value;
  const std::vector<int64_t> held_at = p.local_offsets();
  const DType grad_dtype = p.grad.defined() ? p.grad.dtype() : ctx.grad_dtype;
  p.value = Tensor();
  p.grad = Tensor();
  Placement placement = p.placement();
  WEFT_RETURN_IF_ERROR(p.SetPlacement(placement.Shard(axis, dim, index, count)));
  if (!held.defined()) return absl::OkStatus();  // materialization fills the new box
  // The new box lies inside the held one.
  Tensor box = held;
  for (size_t d = 0; d < p.shape().size(); ++d) {
    const int64_t off = p.local_offsets()[d] - held_at[d];
    box = box.Slice(static_cast<int>(d), off, off + p.shape()[d]);
  }
  NativeStream stream = ctx.run->stream;
  WEFT_ASSIGN_OR_RETURN(p.value, Tensor::Empty(p.shape(), held.dtype(), ctx.run->device,
                                               ctx.param_allocator, stream));
  WEFT_RETURN_IF_ERROR(p.value.CopyFrom(box, stream));
  WEFT_ASSIGN_OR_RETURN(p.grad, Tensor::Zeros(p.shape(), grad_dtype, ctx.run->device,
                                              ctx.grad_allocator, stream));
  return absl::OkStatus();
}

}  // namespace weft
