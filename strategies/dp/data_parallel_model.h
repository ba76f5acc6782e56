// DataParallelModel: the root-model wrapper dp installs (see dp.h).
#ifndef WEFT_STRATEGIES_DP_DATA_PARALLEL_MODEL_H_
#define WEFT_STRATEGIES_DP_DATA_PARALLEL_MODEL_H_

#include <memory>
#include <vector>

#include "core/nn/model.h"

namespace weft {

class DataParallelModel : public Model {
 public:
  struct Replica {
    std::unique_ptr<Model> model;  // null for replica 0 (the master itself)
    RunContext ctx;
    Tensor inputs, targets;        // this replica's chunk, on its device
    int64_t rows = 0;
    int64_t first_row = 0;  // of the micro-batch
  };

  // `master` is materialized; replicas 1.. are created on `devices[1..]`.
  static absl::StatusOr<std::unique_ptr<DataParallelModel>> Create(std::unique_ptr<Model> master,
                                                                   std::vector<Device> devices,
                                                                   const RunContext& ctx,
                                                                   DType grad_dtype);

  absl::StatusOr<Tensor> ForwardLoss(RunContext& ctx, const Tensor& inputs, const Tensor& targets,
                                     float dloss_scale) override;
  absl::Status BackwardFromLoss(RunContext& ctx) override;
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;
  double TrainingFlopsPerTarget() const override { return master_->TrainingFlopsPerTarget(); }
  int64_t TargetsPerSample(const Tensor& t) const override { return master_->TargetsPerSample(t); }
  absl::StatusOr<std::unique_ptr<Model>> CloneArchitecture() const override {
    return master_->CloneArchitecture();
  }
  std::string Summary() const override;

  int num_replicas() const { return static_cast<int>(replicas_.size()); }

 private:
  explicit DataParallelModel(Model* master) : Model("DataParallel"), master_(master) {}
  Model& ReplicaModel(size_t i) { return i == 0 ? *master_ : *replicas_[i].model; }
  absl::Status Replicate();
  absl::Status Scatter(const Tensor& inputs, const Tensor& targets);
  absl::Status ReduceGradients(RunContext& ctx);
  void FollowMicroBatch(const RunContext& ctx, size_t replica, RunContext& replica_ctx) const;

  Model* master_;  // owned as this module's unnamed child
  std::vector<Replica> replicas_;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_DP_DATA_PARALLEL_MODEL_H_
