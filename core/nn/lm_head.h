// LmHead: logits (B*T, Vp) = h (B*T, C) · W^T, with W either its own
// (Vp, C) weight or a tied table owned by the token embedding. A tied head
// accumulates into the embedding's gradient and owns no parameter.
#ifndef WEFT_CORE_NN_LM_HEAD_H_
#define WEFT_CORE_NN_LM_HEAD_H_

#include "core/nn/module.h"

namespace weft {

class LmHead : public Module {
 public:
  // Untied: registers "weight" (vocab_rows, channels).
  LmHead(int64_t vocab_rows, int64_t channels, float init_std);
  // Tied to `table`, which another module owns.
  explicit LmHead(Parameter* table);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& h) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dlogits) override;
  std::vector<Parameter*> BorrowedParameters() const override {
    return tied_ ? std::vector<Parameter*>{weight_} : std::vector<Parameter*>{};
  }

  Parameter* weight() const { return weight_; }
  bool tied() const { return tied_; }

 private:
  Parameter* weight_;
  bool tied_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_LM_HEAD_H_
