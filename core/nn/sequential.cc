#include "core/nn/sequential.h"

#include "core/base/status_macros.h"

namespace weft {

absl::StatusOr<Tensor> Sequential::Forward(RunContext& ctx, const Tensor& x) {
  Tensor h = x;
  for (Module* m : children()) {
    WEFT_ASSIGN_OR_RETURN(h, m->CallForward(ctx, h));
  }
  return h;
}

absl::StatusOr<Tensor> Sequential::Backward(RunContext& ctx, const Tensor& dy) {
  Tensor g = dy;
  std::vector<Module*> kids = children();
  for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
    WEFT_ASSIGN_OR_RETURN(g, (*it)->CallBackward(ctx, g));
  }
  return g;
}

}  // namespace weft
