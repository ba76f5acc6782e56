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
  const std::vector<Parameter*> p = experts.expert_parameters();  // fc_w, fc_b, proj_w, proj_b
  const int64_t hidden = p[0]->global_shape()[1];
  if (hidden % tp.size() != 0) {
    return InvalidArgument(
        absl::StrCat("'", experts.name(), "' has experts of ", hidden,
                     " hidden units, not divisible by tp=", tp.size()),
        "an expert hidden size divisible by tp (each rank holds a block of every expert)",
        "change --expert_mlp_ratio (or d_model) so that tp divides the expert hidden size");
  }
  WEFT_RETURN_IF_ERROR(NarrowParameter(*p[0], "tp", 1, tp.rank(), tp.size(), ctx));
  WEFT_RETURN_IF_ERROR(NarrowParameter(*p[1], "tp", 1, tp.rank(), tp.size(), ctx));
  WEFT_RETURN_IF_ERROR(NarrowParameter(*p[2], "tp", 2, tp.rank(), tp.size(), ctx));
  experts.set_partial_sums(std::make_shared<TpExpertSums>(tp));
  return absl::OkStatus();
}

}  // namespace weft::tp
