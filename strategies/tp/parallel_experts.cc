#include "strategies/tp/parallel_experts.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/parallel/narrow_parameter.h"
#include "strategies/tp/region_ops.h"

namespace weft::tp {
namespace {

class TpExpertSums : public ExpertPartialSums {
 public:
  explicit TpExpertSums(TpComm tp) : tp_(std::move(tp)) {}
  bool adds_output_bias() const override { return tp_.rank() == 0; }
  absl::Status Sum(RunContext&, Tensor& t) override {
    return Annotate(AllReduce(tp_, t).status(), "tp: summing the experts' partial outputs");
  }

 private:
  const TpComm tp_;
};

}  // namespace

absl::Status SplitExperts(ExpertMlps& experts, const TpComm& tp, StrategyContext& ctx) {
  const int64_t hidden = experts.hidden();
  if (hidden % tp.size() != 0) {
    return InvalidArgument(
        absl::StrCat("'", experts.name(), "' has experts of ", hidden,
                     " hidden units, not divisible by tp=", tp.size()),
        "an expert hidden size divisible by tp (each rank holds a block of every expert)",
        "change the expert hidden size (--expert_mlp_ratio, --moe_ffn_hidden) or d_model so "
        "that tp divides it");
  }
  // The experts name their hidden dimensions: tp knows no expert layout.
  for (const ExpertMlps::HiddenSplit& s : experts.HiddenSplits()) {
    WEFT_RETURN_IF_ERROR(NarrowParameter(*s.parameter, "tp", s.dim, tp.rank(), tp.size(), ctx));
  }
  experts.set_partial_sums(std::make_shared<TpExpertSums>(tp));
  return absl::OkStatus();
}

}  // namespace weft::tp
