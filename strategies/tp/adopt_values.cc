#include "strategies/tp/adopt_values.h"

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
    Tensor box = src->value.View(q->global_shape());
    for (size_t d = 0; d < q->shape().size(); ++d) {
      const int64_t off = q->local_offsets()[d];
      box = box.Slice(static_cast<int>(d), off, off + q->box_shape()[d]);
    }
    // A padded shard's rows past the table's end stay zero.
    const bool padded = q->box_shape() != q->shape();
    WEFT_ASSIGN_OR_RETURN(q->value, (padded ? Tensor::Zeros : Tensor::Empty)(
                                        q->shape(), src->value.dtype(), src->value.device(),
                                        o.param_allocator, o.stream));
    Tensor dst = padded ? q->value.Slice(0, 0, q->box_shape()[0]) : q->value;
    WEFT_RETURN_IF_ERROR(dst.CopyFrom(box, o.stream));
    const DType grad_dtype = src->grad.defined() ? src->grad.dtype() : o.grad_dtype;
    WEFT_ASSIGN_OR_RETURN(q->grad, Tensor::Zeros(q->shape(), grad_dtype, src->value.device(),
                                                 o.grad_allocator, o.stream));
  }
  return absl::OkStatus();
}

}  // namespace weft::tp
