// PipelineModel: the root model on one pipeline rank after pp split it.
//
// It keeps the whole model (so parameter names do not change) but runs only
// this rank's chunks: contiguous ranges of Model::Stages(). Chunk c of pp
// rank r is virtual stage c * pp + r; a forward of a chunk takes its input
// from the previous virtual stage (or the batch, on virtual stage 0) and
// sends its output on (or ends in the loss, on the last one); a backward
// takes the gradient from the next virtual stage and sends the input's
// gradient back. The step's order of chunk forwards and backwards comes
// from PipelineStepSchedule; evaluation (ForwardLoss outside training)
// runs one micro-batch through every chunk in order. Each chunk's forward
// and backward runs with RunContext::stage_range set to its stages.
//
// The stages may run on part of each sample: the wrapped model says which
// (Model::LocalBatch; under cp, applied before pp, this rank's zigzag
// chunks of every sequence). Virtual stage 0 embeds that part of the
// inputs, the last one takes the loss on that part of the targets, and
// every chunk's forward and backward runs with its RunContext::sequence,
// so the activations between stages are the part's (their shapes travel
// in the links' headers, and are checked against what the model states:
// Model::StageInput, reshaped by ParallelState::stage_boundary).
#ifndef WEFT_STRATEGIES_PP_PIPELINE_MODEL_H_
#define WEFT_STRATEGIES_PP_PIPELINE_MODEL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/nn/wrapped_model.h"
#include "core/parallel/step_schedule.h"
#include "strategies/pp/pipe_links.h"

namespace weft::pp {

struct ChunkRange {
  int first = 0, last = 0;  // stages [first, last) of the model
};

// One micro-batch as this rank's chunks take it.
struct PipeBatch {
  StageBatch part;  // the wrapped model's LocalBatch of the loaded batch
  float dloss_scale = 1.f;
};

class PipelineModel : public WrappedModel {
 public:
  // `chunks[c]` is this rank's chunk c; `virtual_stages` = pp x chunks.
  // `boundary` (may be null) reshapes the model's stated stage inputs as
  // the strategies applied before pp changed them.
  using Boundary = std::function<absl::StatusOr<StageTensor>(const StageTensor&)>;
  PipelineModel(std::unique_ptr<Model> inner, std::vector<Stage> stages,
                std::vector<ChunkRange> chunks, int virtual_stages, std::unique_ptr<PipeLinks> links,
                Boundary boundary);

  // Re-reads the stage modules from the model, once per step and per
  // evaluation: strategies applied after pp (recompute) swap a stage's
  // modules for wrappers, which must be the ones that run. The stages
  // themselves (names, ranges) stay what pp split.
  absl::Status RefreshStages();
  // The whole model's stages, which chunks (and RunContext::stage_range
  // while a chunk runs) index.
  std::vector<Stage> Stages() override { return inner().Stages(); }
  // The part of a micro-batch (B, T) this rank's stages take.
  absl::StatusOr<PipeBatch> LocalPart(const RunContext& ctx, const Tensor& inputs,
                                      const Tensor& targets, float dloss_scale) const;
  // Forward of chunk `chunk` for micro-batch `micro` (in its context): the
  // per-target losses on the last virtual stage, else an undefined tensor.
  absl::StatusOr<Tensor> ForwardChunk(RunContext& ctx, int chunk, int micro,
                                      const PipeBatch& batch);
  absl::Status BackwardChunk(RunContext& ctx, int chunk, int micro, const PipeBatch& batch);

  // Evaluation through the whole pipeline: the losses on the rank holding
  // the last stage, one zero elsewhere (so sums over ranks are the loss).
  absl::StatusOr<Tensor> ForwardLoss(RunContext& ctx, const Tensor& inputs, const Tensor& targets,
                                     float dloss_scale) override;
  absl::Status BackwardFromLoss(RunContext& ctx) override;
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;
  std::string Summary() const override;

  PipeLinks& links() { return *links_; }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  int virtual_stages() const { return virtual_stages_; }

 private:
  int VirtualStage(int chunk) const { return chunk * links_->size() + links_->rank(); }
  int Tag(int micro, int boundary) const { return micro * virtual_stages_ + boundary; }
  // What chunk `chunk` receives for `batch`, or why that is not known.
  absl::StatusOr<StageTensor> ExpectedInput(const RunContext& ctx, int chunk,
                                            const PipeBatch& batch) const;

  std::vector<Stage> stages_;
  std::vector<ChunkRange> chunks_;
  int virtual_stages_;
  std::unique_ptr<PipeLinks> links_;
  Boundary boundary_;
};

// Runs one step's chunk forwards and backwards in the order of this rank's
// pipeline timeline (pipeline_schedule.h).
class PipelineStepSchedule : public StepSchedule {
 public:
  PipelineStepSchedule(PipelineModel* model, std::string schedule_name);
  std::string Name() const override { return "pp:" + schedule_name_; }
  // This rank's actions as F/B per micro-batch (chunks flattened).
  std::vector<ScheduleAction> Actions(int num_micro) const override;
  absl::Status Run(int num_micro, MicroBatchRunner& runner,
                   const std::vector<std::unique_ptr<StepParticipant>>& participants) const override;

  // Peaks since the last call: micro-batches whose activations this rank
  // held at once (forward started, backward not finished) and the
  // activation store's bytes then.
  struct Peaks {
    int in_flight = 0;
    int64_t activation_bytes = 0;
  };
  Peaks TakePeaks() const;

 private:
  PipelineModel* model_;
  std::string schedule_name_;
  mutable Peaks peaks_;
};

}  // namespace weft::pp

#endif  // WEFT_STRATEGIES_PP_PIPELINE_MODEL_H_
