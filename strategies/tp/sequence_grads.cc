#include "strategies/tp/sequence_grads.h"

#include <memory>
#include <vector>

#include "core/base/status_macros.h"
#include "strategies/tp/region_ops.h"

namespace weft::tp {

void ReduceGradsOverTp(Module& m, const TpComm& tp) {
  // The real gradients while backward writes the partial ones.
  auto stash = std::make_shared<std::vector<Tensor>>();
  m.AddHook(Module::HookPoint::kPreBackward, [stash](Module& mod, RunContext& ctx) -> absl::Status {
    stash->clear();
    for (Parameter* p : mod.held_own_parameters()) {
      stash->push_back(p->grad);
      WEFT_ASSIGN_OR_RETURN(p->grad, ctx.Zeros(p->shape(), p->grad.dtype()));
    }
    return absl::OkStatus();
  });
  m.AddHook(Module::HookPoint::kPostBackward,
            [stash, tp](Module& mod, RunContext& ctx) -> absl::Status {
              std::vector<Parameter*> params = mod.held_own_parameters();
              for (size_t i = 0; i < params.size() && i < stash->size(); ++i) {
                Parameter* p = params[i];
                WEFT_RETURN_IF_ERROR(AllReduce(tp, p->grad).status());
                Tensor real = (*stash)[i];
                WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), real, real, p->grad));
                p->grad = real;
              }
              stash->clear();
              return absl::OkStatus();
            });
}

}  // namespace weft::tp
