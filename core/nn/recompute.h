// Activation recompute: a wrapper that keeps only its input during forward
// and runs the wrapped module's forward again just before its backward.
// Trades one extra forward for the activation memory of the module.
//
// The wrapper takes the wrapped module's place and name in the tree, so
// parameter names do not change. Hooks of the inner modules fire on both
// forwards (FSDP-style strategies re-gather parameters for the second one).
#ifndef WEFT_CORE_NN_RECOMPUTE_H_
#define WEFT_CORE_NN_RECOMPUTE_H_

#include <memory>
#include <string>

#include "core/nn/module.h"

namespace weft {

class Recompute : public Module {
 public:
  Recompute() : Module("Recompute") {}

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  Module* inner() const { return inner_; }

 private:
  friend absl::Status EnableRecompute(Module& parent, const std::string& child);
  Module* inner_ = nullptr;
};

// Wraps `parent`'s child named `child` in a Recompute.
absl::Status EnableRecompute(Module& parent, const std::string& child);

}  // namespace weft

#endif  // WEFT_CORE_NN_RECOMPUTE_H_
