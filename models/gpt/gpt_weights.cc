#include "models/gpt/gpt_weights.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/parameter.h"

namespace weft {
namespace {

absl::Status CheckWhole(const Parameter& p) {
  if (p.shape() != p.global_shape()) {
    return FailedPrecondition(
        absl::StrCat("parameter '", p.name(), "' is sharded (local ", ShapeString(p.shape()),
                     " of ", ShapeString(p.global_shape()), ")"),
        "whole parameters", "copy weights before applying sharding strategies");
  }
  if (!p.value.defined()) {
    return FailedPrecondition(absl::StrCat("parameter '", p.name(), "' has no value"),
                              "a materialized model", "call MaterializeParameters first");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GptWeights> ExportWeights(Module& model) {
  GptWeights out;
  for (Parameter* p : model.Parameters()) {
    WEFT_RETURN_IF_ERROR(CheckWhole(*p));
    ckpt::HostTensor& t = out[p->name()];
    t.shape.assign(p->shape().begin(), p->shape().end());
    WEFT_ASSIGN_OR_RETURN(t.values, p->value.ToFloats());
  }
  return out;
}

void ToModelShapes(Module& model, GptWeights* weights) {
  for (Parameter* p : model.Parameters()) {
    auto it = weights->find(p->name());
    if (it == weights->end()) continue;
    const std::vector<int64_t> want(p->global_shape().begin(), p->global_shape().end());
    if (ckpt::SameRowMajorLayout(it->second.shape, want)) it->second.shape = want;
  }
}

absl::Status ImportWeights(const GptWeights& weights, Module& model) {
  // Everything is checked before the first copy, so a bad map leaves the
  // model untouched.
  const std::vector<Parameter*> params = model.Parameters();
  std::vector<std::string> missing;
  for (Parameter* p : params) {
    auto it = weights.find(p->name());
    if (it == weights.end()) {
      missing.push_back(p->name());
      continue;
    }
    WEFT_RETURN_IF_ERROR(CheckWhole(*p));
    const ckpt::HostTensor& t = it->second;
    if (Shape(t.shape.begin(), t.shape.end()) != p->global_shape() ||
        t.values.size() != static_cast<size_t>(p->global_numel())) {
      return InvalidArgument(
          absl::StrCat("weights for '", p->name(), "' have shape ", ShapeString(t.shape), " and ",
                       t.values.size(), " values"),
          absl::StrCat("the parameter's ", ShapeString(p->global_shape())),
          "the weights come from a differently configured model");
    }
  }
  if (!missing.empty()) {
    return InvalidArgument(absl::StrCat("no weights for ", missing.size(),
                                        " parameters: ", absl::StrJoin(missing, ", ")),
                           "a value for every parameter of the model");
  }
  if (params.size() != weights.size()) {
    std::vector<std::string> extra;
    for (const auto& [name, t] : weights) {
      if (model.FindParameter(name) == nullptr) extra.push_back(name);
    }
    return InvalidArgument(absl::StrCat("weights with no parameter: ", absl::StrJoin(extra, ", ")),
                           "only the model's parameter names",
                           "the weights come from a different architecture");
  }
  for (Parameter* p : params) {
    // Convert on the host, then copy across devices (which needs equal dtypes).
    WEFT_ASSIGN_OR_RETURN(Tensor host, Tensor::FromFloats(weights.at(p->name()).values, p->shape(),
                                                          p->value.dtype()));
    WEFT_RETURN_IF_ERROR(p->value.CopyFrom(host));
  }
  return absl::OkStatus();
}

}  // namespace weft
