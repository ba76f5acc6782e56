#include "strategies/tp/sequence_grads.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/tp/region_ops.h"

namespace weft::tp {
namespace {

// While backward runs: the real gradients, and one zeroed buffer that the
// module's partial gradients are views of, so a single all-reduce sums
// them all (a LayerNorm's weight and bias: one collective, not two).
struct Partials {
  std::vector<Tensor> real;
  Tensor buffer;
};

}  // namespace

void ReduceGradsOverTp(Module& m, const TpComm& tp) {
  auto partials = std::make_shared<Partials>();
  m.AddHook(Module::HookPoint::kPreBackward,
            [partials](Module& mod, RunContext& ctx) -> absl::Status {
              std::vector<Parameter*> params = mod.held_own_parameters();
              partials->real.clear();
              if (params.empty()) return absl::OkStatus();
              const DType dtype = params[0]->grad.dtype();
              int64_t total = 0;
              for (Parameter* p : params) {
                if (p->grad.dtype() != dtype) {
                  return FailedPrecondition(
                      absl::StrCat("sequence-parallel module ", mod.name(), " has gradients of ",
                                   DTypeName(dtype), " and ", DTypeName(p->grad.dtype()), " (",
                                   p->name(), ")"),
                      "one gradient dtype per module", "use one --grad_dtype for the job");
                }
                total += NumElements(p->shape());
              }
              WEFT_ASSIGN_OR_RETURN(partials->buffer, ctx.Zeros({total}, dtype));
              int64_t offset = 0;
              for (Parameter* p : params) {
                partials->real.push_back(p->grad);
                const int64_t n = NumElements(p->shape());
                p->grad = partials->buffer.Slice(0, offset, offset + n).View(p->shape());
                offset += n;
              }
              return absl::OkStatus();
            });
  m.AddHook(Module::HookPoint::kPostBackward,
            [partials, tp](Module& mod, RunContext& ctx) -> absl::Status {
              std::vector<Parameter*> params = mod.held_own_parameters();
              if (params.empty()) return absl::OkStatus();
              if (partials->real.size() != params.size()) {
                return Internal(absl::StrCat(
                    "sequence-parallel module ", mod.name(), " ended backward with ", params.size(),
                    " parameters after starting it with ", partials->real.size()));
              }
              WEFT_RETURN_IF_ERROR(AllReduce(tp, partials->buffer).status());
              for (size_t i = 0; i < params.size(); ++i) {
                Tensor real = partials->real[i];
                WEFT_RETURN_IF_ERROR(ctx.ops->Add(ctx.kernel(), real, real, params[i]->grad));
                params[i]->grad = real;
              }
              partials->real.clear();
              partials->buffer = Tensor();
              return absl::OkStatus();
            });
}

}  // namespace weft::tp
