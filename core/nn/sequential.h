// Sequential: children run in registration order forward and in reverse
// order backward. Children are named "0", "1", ... like torch.nn.Sequential.
#ifndef WEFT_CORE_NN_SEQUENTIAL_H_
#define WEFT_CORE_NN_SEQUENTIAL_H_

#include <memory>

#include "core/nn/module.h"

namespace weft {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}

  // Children are called in order through Module, so any can be swapped;
  // the returned pointer is for construction only.
  template <typename M>
  M* Append(std::unique_ptr<M> module) {
    return RegisterSwappableModule(std::to_string(num_children()), std::move(module));
  }
  int size() const { return static_cast<int>(num_children()); }

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_SEQUENTIAL_H_
