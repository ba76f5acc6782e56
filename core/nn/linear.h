// Linear: y = x W^T + b, optionally followed by GELU fused into the GEMM
// epilogue. W is (out, in) like PyTorch; x is (..., in).
//
// Backward fusion across layers: in an MLP, fc (with GELU) feeds proj. When
// the MLP calls proj->FuseGeluBackwardInto(fc) before backward, proj
// computes fc's pre-activation gradient directly (the DGELU epilogue on its
// dx GEMM, plus fc's bias gradient), and fc's Backward then skips the GELU
// derivative and its bias gradient. The setting lasts one Backward call.
#ifndef WEFT_CORE_NN_LINEAR_H_
#define WEFT_CORE_NN_LINEAR_H_

#include "core/nn/module.h"

namespace weft {

class Linear : public Module {
 public:
  struct Options {
    bool bias = true;
    bool gelu = false;
    float init_std = 0.02f;
  };

  Linear(int64_t in_features, int64_t out_features, Options options);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;
  void FuseGeluBackwardInto(Linear* producer);

  Parameter* weight() const { return weight_; }
  Parameter* bias() const { return bias_; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  const Options& options() const { return options_; }

 private:
  const int64_t in_, out_;
  const Options options_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
  // Saved per micro-batch: input (M, in), pre-activation (M, out) when
  // gelu, and the output shape.
  enum { kInput, kPreActivation };
  Linear* fuse_into_ = nullptr;       // set for one backward by the MLP
  bool dy_is_preactivation_ = false;  // set on the producer by its consumer
};

}  // namespace weft

#endif  // WEFT_CORE_NN_LINEAR_H_
