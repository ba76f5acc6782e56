// Column- and row-parallel linear layers (y = x W^T + b, W is (out, in)).
//
// ColumnParallelLinear holds rows [r * out/tp, (r+1) * out/tp) of W and b
// (Shard(0)@tp). Its input enters the region whole (copy_to; all-gather
// along T under sequence parallelism) and its output stays split by
// feature. With packed = k the output is k equal sections (fused q, k, v):
// W is placed as (k, out/k, in) sharded on dim 1, so a rank holds the same
// block of every section, i.e. whole heads of q, k and v.
//
// RowParallelLinear holds columns [r * in/tp, ...) of W (Shard(1)@tp) and
// takes a feature-split input; partial outputs are summed on leaving the
// region (all-reduce; reduce-scatter along T under sequence parallelism).
// Its bias is replicated and added once, by tp rank 0 before the sum; its
// gradient comes from the whole output gradient, so it is identical on
// every rank.
#ifndef WEFT_STRATEGIES_TP_PARALLEL_LINEAR_H_
#define WEFT_STRATEGIES_TP_PARALLEL_LINEAR_H_

#include "core/nn/module.h"
#include "strategies/tp/tp_comm.h"

namespace weft::tp {

// A tp layer's weight (and bias) gradients from its output gradient `d`
// (rows of dy, maybe dy's own buffer; dy undefined: a buffer nobody
// reuses) and saved input `x`: dW += d^T x (in
// `weight_view` when not empty), db += column sums of d. Now, or, for a
// split backward (RunContext::defer_weight_grads, zero-bubble pipelines),
// queued for the schedule's W, with its own copy of d when d is dy's
// buffer, which the caller may reuse (residual gradients accumulate in
// place), like core/nn/linear.cc. `bias` may be null.
absl::Status WeightGradsNowOrAtW(RunContext& ctx, const Tensor& d, const Tensor& dy,
                                 const Tensor& x, Parameter* weight, Parameter* bias,
                                 const Shape& weight_view);

struct ParallelLinearOptions {
  bool bias = true;
  bool gelu = false;  // column only: GELU fused in the GEMM epilogue
  InitSpec weight_init = InitSpec::Normal(0.02f);
  int packed = 1;     // column only
  // Column only: each block of outputs is held by this many consecutive tp
  // ranks (K/V heads fewer than tp ranks), rank r holding block r /
  // replicas; their weight gradients are partial sums over those ranks.
  int replicas = 1;
};

class ColumnParallelLinear : public Module {
 public:
  // Errors when out (per section) does not divide by tp.
  static absl::StatusOr<std::unique_ptr<ColumnParallelLinear>> Create(
      int64_t in_features, int64_t out_features, ParallelLinearOptions options, TpComm tp);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  Parameter* weight() const { return weight_; }
  Parameter* bias() const { return bias_; }

 private:
  ColumnParallelLinear(int64_t in, int64_t out, ParallelLinearOptions options, TpComm tp)
      : Module("ColumnParallelLinear"), in_(in), out_(out), options_(options), tp_(std::move(tp)) {}
  absl::Status Init();

  const int64_t in_, out_;
  const ParallelLinearOptions options_;
  const TpComm tp_;
  int64_t local_out_ = 0;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  enum { kInput, kPreActivation };  // saved: whole input (M, in), (M, out/tp)
};

class RowParallelLinear : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<RowParallelLinear>> Create(
      int64_t in_features, int64_t out_features, ParallelLinearOptions options, TpComm tp);

  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  Parameter* weight() const { return weight_; }
  Parameter* bias() const { return bias_; }

 private:
  RowParallelLinear(int64_t in, int64_t out, ParallelLinearOptions options, TpComm tp)
      : Module("RowParallelLinear"), in_(in), out_(out), options_(options), tp_(std::move(tp)) {}
  absl::Status Init();

  const int64_t in_, out_;
  const ParallelLinearOptions options_;
  const TpComm tp_;
  int64_t local_in_ = 0;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  enum { kInput };  // saved: (M, in/tp)
};

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_PARALLEL_LINEAR_H_
