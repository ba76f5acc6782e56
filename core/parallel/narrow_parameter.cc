#include "core/parallel/narrow_parameter.h"

#include "core/base/status_macros.h"
#include "core/nn/materialize.h"

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
  return AdoptBox(p, held, held_at, grad_dtype,
                  {.stream = ctx.run->stream,
                   .param_allocator = ctx.param_allocator,
                   .grad_allocator = ctx.grad_allocator});
}

}  // namespace weft
