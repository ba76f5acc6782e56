#include "strategies/tp/adopt_values.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::tp {
namespace {

const Parameter* OwnParameter(const Module& m, const std::string& local_name) {
  for (const auto& p : m.own_parameters()) {
    if (p->local_name() == local_name) return p.get();
  }
  return nullptr;
}

}  // namespace

absl::Status AdoptValues(const Module& old, Module& fresh, const AdoptOptions& o) {
  for (const auto& q : fresh.own_parameters()) {
    const Parameter* src = OwnParameter(old, q->local_name());
    if (src == nullptr) {
      return Internal(absl::StrCat("tp: ", fresh.type_name(), " has parameter ",
                                   q->local_name(), " that ", old.type_name(), " lacks"));
    }
    if (!src->value.defined()) continue;
    if (src->value.numel() != q->global_numel()) {
      return Internal(absl::StrCat("tp: ", src->name(), " holds ", src->value.numel(),
                                   " values, its parallel version ", q->global_numel()));
    }
    const DType grad_dtype = src->grad.defined() ? src->grad.dtype() : o.grad_dtype;
    WEFT_RETURN_IF_ERROR(AdoptBox(*q, src->value.View(q->global_shape()),
                                  std::vector<int64_t>(q->shape().size(), 0), grad_dtype,
                                  o.tensors));
  }
  return absl::OkStatus();
}

}  // namespace weft::tp
