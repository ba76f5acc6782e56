// ExpertMlps: E independent MLPs applied to a buffer of token rows grouped
// by expert, through grouped GEMMs. Two kinds of expert:
//   kGelu    GPT-2's MLP (fc with GELU, proj), with biases: fc_weight
//            (E, H, C), fc_bias (E, H), proj_weight (E, C, H), proj_bias (E, C);
//   kSwiGlu  Llama's (Mixtral's, Qwen3-MoE's) SwiGLU without biases:
//            gate_up_weight (E, 2, H, C) (the gate projection's rows, then
//            the up projection's) and down_weight (E, C, H).
// The expert strategy shards dim 0 of every expert parameter; the module
// serves whatever experts its local shape holds, and expert_offset() says
// which.
//
// Rows come in runs: R consecutive blocks of rows, each grouped by local
// expert (counts[r * L + j] rows of local expert j in run r). One process
// has one run; an ep rank gets one run per source rank, in the order the
// all_to_all_v delivers them, and computes the run it already holds while
// the others are in flight (ForwardRuns / BackwardRuns with a RowSource).
//
// Tensor parallelism (Megatron's expert tensor parallelism): the tp
// strategy may also shard the hidden units of every expert, along the
// dimensions HiddenSplits() names (the first projection by output
// features, the second by input features), and install ExpertPartialSums.
// Each tp rank then computes a partial output for the same rows, and the
// partial sums are summed over tp once after the experts (forward) and once
// for the input gradient (backward); proj_bias is added by one rank only.
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

enum class ExpertActivation { kGelu, kSwiGlu };

class ExpertMlps : public Module {
 public:
  ExpertMlps(int num_experts, int64_t channels, int64_t hidden, float init_std,
             float proj_init_std, ExpertActivation activation = ExpertActivation::kGelu);

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
  int num_local_experts() const { return static_cast<int>(in_weight_->shape()[0]); }
  int num_experts() const { return static_cast<int>(in_weight_->global_shape()[0]); }
  int expert_offset() const { return static_cast<int>(in_weight_->local_offsets()[0]); }
  ExpertActivation activation() const { return activation_; }
  // Every parameter, stacked over experts (dim 0): kGelu fc_weight, fc_bias,
  // proj_weight, proj_bias; kSwiGlu gate_up_weight, down_weight.
  std::vector<Parameter*> expert_parameters() const;
  // Hidden units per expert, over all tp ranks.
  int64_t hidden() const { return in_weight_->global_shape()[hidden_dim_]; }
  // The parameters whose hidden units tp splits, each with the dimension
  // that holds them (the output bias is whole on every rank).
  struct HiddenSplit {
    Parameter* parameter;
    int dim;
  };
  std::vector<HiddenSplit> HiddenSplits() const;
  // Null: this rank holds every hidden unit of its experts.
  void set_partial_sums(std::shared_ptr<ExpertPartialSums> p) { partial_ = std::move(p); }
  bool tensor_parallel() const { return partial_ != nullptr; }

 private:
  enum { kInput, kPreActivation, kHidden, kCounts };
  // Start row of each run, and the total; an error for a bad count vector.
  absl::StatusOr<std::vector<int64_t>> RunStarts(const std::vector<int64_t>& counts) const;

  // The grouped GEMMs' (L, N, K) view of a (possibly packed) weight.
  static Tensor Grouped(const Tensor& t);
  absl::Status ForwardRun(RunContext& ctx, const Tensor& xr, const Tensor& pre,
                          const Tensor& h, const Tensor& y, const std::vector<int64_t>& c) const;

  const int64_t channels_;
  const ExpertActivation activation_;
  // kGelu: fc, proj and their biases; kSwiGlu: gate_up, down, no biases.
  Parameter* in_weight_;
  Parameter* in_bias_ = nullptr;
  Parameter* out_weight_;
  Parameter* out_bias_ = nullptr;
  int hidden_dim_;  // of in_weight_: 1 (fc) or 2 (gate_up's (E, 2, H, C))
  std::shared_ptr<ExpertPartialSums> partial_;
};

}  // namespace weft

#endif  // WEFT_CORE_NN_EXPERT_MLPS_H_
