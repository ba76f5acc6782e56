// MLP classifier: Linear+GELU hidden layers, a linear output layer, and
// softmax cross-entropy over the classes (e.g. 784-256-128-10 for
// Fashion-MNIST). Pure math, like every model.
#ifndef WEFT_MODELS_MLP_MLP_CLASSIFIER_H_
#define WEFT_MODELS_MLP_MLP_CLASSIFIER_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/nn/loss.h"
#include "core/nn/model.h"
#include "core/nn/sequential.h"
#include "models/mlp/mlp_config.pb.h"

namespace weft {

class MlpClassifier : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<MlpClassifier>> Create(const MlpConfig& config);

  // inputs (B, input_dim) float; targets (B) i32. Returns losses (B).
  absl::StatusOr<Tensor> ForwardLoss(RunContext& ctx, const Tensor& inputs, const Tensor& targets,
                                     float dloss_scale) override;
  // inputs -> logits (B, num_classes).
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& inputs) override;
  // "layers" (inputs in the compute dtype -> logits), "loss".
  std::vector<Stage> Stages() override;
  double TrainingFlopsPerTarget() const override;
  absl::StatusOr<std::unique_ptr<Model>> CloneArchitecture() const override;
  int64_t TargetsPerSample(const Tensor&) const override { return 1; }
  std::string Summary() const override;

  const std::vector<int64_t>& widths() const { return widths_; }

 private:
  MlpClassifier(const MlpConfig& config, std::vector<int64_t> widths);

  MlpConfig config_;
  std::vector<int64_t> widths_;  // input, hidden..., classes
  // Inputs in the compute dtype, checked: (B, input_dim).
  absl::StatusOr<Tensor> PrepareInputs(RunContext& ctx, const Tensor& inputs) const;

  Sequential* layers_;
  CrossEntropyLoss* loss_;
};

}  // namespace weft

#endif  // WEFT_MODELS_MLP_MLP_CLASSIFIER_H_
