// ExpertMlps: E independent GPT-2 MLPs (fc with GELU, proj) applied to a
// buffer of token rows grouped by expert, through grouped GEMMs.
//
// Parameters are stacked over experts: fc_weight (E, H, C), fc_bias (E, H),
// proj_weight (E, C, H), proj_bias (E, C). The expert strategy shards dim 0;
// the module serves whatever experts its local shape holds (the first
// dimension of fc_weight), and ExpertOffset() says which.
//
// Rows come in runs: R consecutive blocks of rows, each grouped by local
// expert (counts[r * L + j] rows of local expert j in run r). One process
// has one run; an ep rank gets one run per source rank, in the order the
// all_to_all_v delivers them, and computes the run it already holds while
// the others are in flight (ForwardRuns / BackwardRuns with a RowSource).
//
// Tensor parallelism (Megatron's expert tensor parallelism): the tp
// strategy may also shard the hidden units of every expert (fc by output
// features, proj by input features: dims 1, 1 and 2 of fc_weight, fc_bias
// and proj_weight) and install ExpertPartialSums. Each tp rank then
// computes a partial output for the same rows, and the partial sums are
// summed over tp once after the experts (forward) and once for the input
// gradient (backward); proj_bias is added by one rank only.
#ifndef WEFT_CORE_NN_EXPERT_MLPS_H_
#define WEFT_CORE_NN_EXPERT_MLPS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/nn/module.h"

namespace weft {

// Sums partial outputs over the ranks holding the other hidden units of the
// same experts (installed by the tp strategy; the model knows no ranks).
class ExpertPartialSums {
 public:
  virtual ~ExpertPartialSums() = default;
  // Whether this rank's partial output carries proj_bias (exactly one does).
  virtual bool adds_output_bias() const = 0;
  // `t` summed over the ranks, in place. Collective: every rank calls it in
  // the same order.
  virtual absl::Status Sum(RunContext& ctx, Tensor& t) = 0;
};

class ExpertMlps : public Module {
 public:
  ExpertMlps(int num_experts, int64_t channels, int64_t hidden, float init_std,
             float proj_init_std);

  // Rows of run r ((M_r, C), the values of rows [start_r, start_r + M_r) of
  // the whole buffer); called once per run, in the order given, and may
  // wait for them to arrive.
  using RowSource = std::function<absl::StatusOr<Tensor>(int run)>;

  // x (M, C) in runs with `counts` (a multiple of L entries) -> (M, C).
  absl::StatusOr<Tensor> ForwardGrouped(RunContext& ctx, const Tensor& x,
                                        const std::vector<int64_t>& counts);
  // The same, run by run in `order`, reading each run's rows from `rows`;
  // `x` is the whole buffer, kept for backward (read only in backward).
  absl::StatusOr<Tensor> ForwardRuns(RunContext& ctx, const Tensor& x,
                                     const std::vector<int64_t>& counts,
                                     const std::vector<int>& order, const RowSource& rows);
  // dy (M, C) -> dx (M, C); accumulates the experts' gradients.
  absl::StatusOr<Tensor> BackwardGrouped(RunContext& ctx, const Tensor& dy);
  // The same, run by run in `order`, reading each run's dy rows from `dy`.
  absl::StatusOr<Tensor> BackwardRuns(RunContext& ctx, const std::vector<int>& order,
                                      const RowSource& dy);

  // Grouped rows need their counts: plain Forward is an error.
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  // Experts held here, and the global index of the first.
  int num_local_experts() const { return static_cast<int>(fc_weight_->shape()[0]); }
  int num_experts() const { return static_cast<int>(fc_weight_->global_shape()[0]); }
  int expert_offset() const { return static_cast<int>(fc_weight_->local_offsets()[0]); }
  std::vector<Parameter*> expert_parameters() const {
    return {fc_weight_, fc_bias_, proj_weight_, proj_bias_};
  }
  // Null: this rank holds every hidden unit of its experts.
  void set_partial_sums(std::shared_ptr<ExpertPartialSums> p) { partial_ = std::move(p); }
  bool tensor_parallel() const { return partial_ != nullptr; }

 private:
  enum { kInput, kPreActivation, kHidden, kCounts };
  // Start row of each run, and the total; an error for a bad count vector.
  absl::StatusOr<std::vector<int64_t>> RunStarts(const std::vector<int64_t>& counts) const;

  const int64_t channels_;
  Parameter* fc_weight_;
  Parameter* fc_bias_;
  Parameter* proj_weight_;
  Parameter* proj_bias_;
  std::shared_ptr<ExpertPartialSums> partial_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_EXPERT_MLPS_H_
