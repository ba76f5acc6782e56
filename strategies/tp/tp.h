// tp: Megatron-style tensor parallelism as a strategy plugin, and sp, the
// same with sequence parallelism (Megatron-SP).
//
// The model's plan (Model::ParallelPlan, core/nn/tp_plan.h) names
// which modules split and how; this strategy knows no concrete model:
//   colwise  Linear -> ColumnParallelLinear (packed sections: fused q, k, v)
//   rowwise  Linear -> RowParallelLinear
//   vocab    TokenPositionEmbedding / LmHead / CrossEntropyLoss -> their
//            vocabulary-parallel versions (a tied head reads the sharded table)
//   sequence (sp only) LayerNorm: its gradients are summed over tp;
//            Dropout: masks of this rank's block of the sequence
// An attention block keeps working on whole heads: it sizes itself from
// what its column-parallel qkv returns. Parallel modules take over the
// values the replaced ones had (slices of single-process init), and
// parameters every tp rank holds whole are marked replicas for the export.
//
// Under sp the residual stream between regions is (B, T/tp, C): layer
// norms, dropout and the residual adds run on sequence shards; an
// all-gather enters each column region and a reduce-scatter leaves each
// row region, where plain tp all-reduces. Pipeline stages then pass those
// shards too (ParallelState::stage_boundary says so).
//
// Under cp the sequence is the rank's chunks (T/cp tokens) and sp's shards
// are blocks of those, (B, T/(cp tp), C), placed by RunContext::sequence;
// seq_len must then divide by cp x tp (region_ops says so).
// Composes with ddp and fsdp on the mesh (tp innermost); fsdp flattens the
// tp-local pieces. Depends only on comm/ and core/.
#ifndef WEFT_STRATEGIES_TP_TP_H_
#define WEFT_STRATEGIES_TP_TP_H_

#include <memory>

#include "core/parallel/strategy.h"

namespace weft {

class TensorParallelStrategy : public Strategy {
 public:
  explicit TensorParallelStrategy(bool sequence_parallel = false)
      : sequence_parallel_(sequence_parallel) {}
  static std::unique_ptr<Strategy> CreateTp() {
    return std::make_unique<TensorParallelStrategy>(false);
  }
  static std::unique_ptr<Strategy> CreateSp() {
    return std::make_unique<TensorParallelStrategy>(true);
  }

  std::string Name() const override { return sequence_parallel_ ? "sp" : "tp"; }
  StrategyPhase Phase() const override { return StrategyPhase::kTensorParallel; }
  std::vector<std::string> RequiredAxes() const override { return {"tp"}; }
  OptionSchema Options() const override;
  absl::Status Validate(const StrategyOptionSet& options,
                        const comm::MeshLayout* mesh) const override;
  absl::StatusOr<StrategyResult> Apply(StrategyContext& ctx) override;

 private:
  const bool sequence_parallel_;
};

}  // namespace weft

#endif  // WEFT_STRATEGIES_TP_TP_H_
