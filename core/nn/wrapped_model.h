// WrappedModel: a Model that runs another one differently (a pipeline's
// stage of it, context-parallel chunks of it) and is otherwise that model.
// The inner model is this module's unnamed child, so parameter and module
// paths stay the inner model's, and everything a wrapper does not change is
// forwarded here once: FLOPs, targets per sample, the architecture, the
// tensor-parallel plan, per-step metrics, probe inputs, the part of a
// batch the stages take and their boundary tensors.
#ifndef WEFT_CORE_NN_WRAPPED_MODEL_H_
#define WEFT_CORE_NN_WRAPPED_MODEL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/nn/model.h"

namespace weft {

class WrappedModel : public Model {
 public:
  double TrainingFlopsPerTarget() const override { return inner_->TrainingFlopsPerTarget(); }
  int64_t TargetsPerSample(const Tensor& t) const override { return inner_->TargetsPerSample(t); }
  absl::StatusOr<std::unique_ptr<Model>> CloneArchitecture() const override {
    return inner_->CloneArchitecture();
  }
  TensorParallelPlan ParallelPlan() const override { return inner_->ParallelPlan(); }
  void AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) override {
    inner_->AppendStepMetrics(out);
  }
  absl::StatusOr<std::pair<Tensor, Tensor>> ProbeInputs(const RunContext& ctx) const override {
    return inner_->ProbeInputs(ctx);
  }
  absl::StatusOr<StageBatch> LocalBatch(const RunContext& ctx, const Tensor& inputs,
                                        const Tensor& targets) const override {
    return inner_->LocalBatch(ctx, inputs, targets);
  }
  absl::StatusOr<StageTensor> StageInput(const RunContext& ctx, const StageBatch& part,
                                         int stage) const override {
    return inner_->StageInput(ctx, part, stage);
  }

 protected:
  WrappedModel(const std::string& type_name, std::unique_ptr<Model> inner)
      : Model(type_name), inner_(inner.get()) {
    RegisterModule("", std::move(inner));
  }
  Model& inner() const { return *inner_; }

 private:
  Model* inner_;  // owned as this module's unnamed child
};

}  // namespace weft

#endif  // WEFT_CORE_NN_WRAPPED_MODEL_H_
