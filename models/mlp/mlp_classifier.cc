#include "models/mlp/mlp_classifier.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/dropout.h"
#include "core/nn/linear.h"

namespace weft {

absl::StatusOr<std::unique_ptr<MlpClassifier>> MlpClassifier::Create(const MlpConfig& c) {
  std::vector<int64_t> widths = {c.input_dim()};
  for (absl::string_view part : absl::StrSplit(c.hidden(), ',', absl::SkipEmpty())) {
    int64_t w = 0;
    if (!absl::SimpleAtoi(part, &w) || w < 1) {
      return InvalidArgument(absl::StrCat("hidden layer width '", part, "' in '", c.hidden(), "'"),
                             "positive integers, comma-separated, e.g. 256,128");
    }
    widths.push_back(w);
  }
  widths.push_back(c.num_classes());
  if (c.input_dim() < 1 || c.num_classes() < 2) {
    return InvalidArgument(absl::StrCat("input_dim=", c.input_dim(), " num_classes=",
                                        c.num_classes()),
                           "input_dim >= 1 and num_classes >= 2");
  }
  if (c.dropout() < 0 || c.dropout() >= 1) {
    return InvalidArgument(absl::StrCat("dropout=", c.dropout()), "0 <= dropout < 1");
  }
  if (!(c.init_std() > 0)) {  // NaN too
    return InvalidArgument(absl::StrCat("init_std=", c.init_std()),
                           "a positive standard deviation for the weights' normal init");
  }
  return std::unique_ptr<MlpClassifier>(new MlpClassifier(c, std::move(widths)));
}

MlpClassifier::MlpClassifier(const MlpConfig& c, std::vector<int64_t> widths)
    : Model("MlpClassifier"), config_(c), widths_(std::move(widths)) {
  layers_ = RegisterModule("layers", std::make_unique<Sequential>());
  for (size_t i = 0; i + 1 < widths_.size(); ++i) {
    const bool hidden = i + 2 < widths_.size();
    layers_->Append(std::make_unique<Linear>(
        widths_[i], widths_[i + 1], Linear::Options{.gelu = hidden, .init_std = c.init_std()}));
    if (hidden && c.dropout() > 0) layers_->Append(std::make_unique<Dropout>(c.dropout()));
  }
  loss_ = RegisterModule("loss", std::make_unique<CrossEntropyLoss>(c.num_classes()));
}

absl::StatusOr<Tensor> MlpClassifier::PrepareInputs(RunContext& ctx,
                                                    const Tensor& inputs) const {
  if (inputs.ndim() != 2 || inputs.dim(1) != widths_.front()) {
    return InvalidArgument("inputs " + ShapeString(inputs.shape()),
                           absl::StrCat("(B, ", widths_.front(), ")"));
  }
  if (inputs.dtype() == ctx.compute_dtype) return inputs;
  return inputs.ToDType(ctx.compute_dtype, ctx.stream);
}

std::vector<Stage> MlpClassifier::Stages() {
  return {{.name = "layers", .modules = {layers_}}, {.name = "loss", .loss = loss_}};
}

absl::StatusOr<Tensor> MlpClassifier::Forward(RunContext& ctx, const Tensor& inputs) {
  WEFT_ASSIGN_OR_RETURN(Tensor x, PrepareInputs(ctx, inputs));
  return Model::Forward(ctx, x);
}

absl::StatusOr<Tensor> MlpClassifier::ForwardLoss(RunContext& ctx, const Tensor& inputs,
                                                  const Tensor& targets, float dloss_scale) {
  if (targets.ndim() != 1 || targets.dim(0) != inputs.dim(0)) {
    return InvalidArgument("targets " + ShapeString(targets.shape()),
                           absl::StrCat("(", inputs.dim(0), ") labels"));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor x, PrepareInputs(ctx, inputs));
  return Model::ForwardLoss(ctx, x, targets, dloss_scale);
}

double MlpClassifier::TrainingFlopsPerTarget() const {
  double macs = 0;
  for (size_t i = 0; i + 1 < widths_.size(); ++i) macs += double(widths_[i]) * widths_[i + 1];
  return 6.0 * macs;
}

absl::StatusOr<std::unique_ptr<Model>> MlpClassifier::CloneArchitecture() const {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<MlpClassifier> copy, Create(config_));
  return std::unique_ptr<Model>(std::move(copy));
}

std::string MlpClassifier::Summary() const {
  return absl::StrCat("MLP ", absl::StrJoin(widths_, "-"));
}

}  // namespace weft
