// SequenceGathered: runs a module on whole sequences under sequence
// parallelism, where its input arrives as this tp rank's sequence block
// (B, T/tp, C) and its output must leave as one.
//
// For a layer whose tp split needs every token on every tp rank: a
// mixture-of-experts layer routes whole sequences (capacity, drop order and
// balance loss span them) and its experts' hidden units are split over tp,
// so every tp rank computes partial outputs for the same rows (see
// parallel_experts.h). Forward all-gathers the blocks along T, runs the
// module, and keeps this rank's block of the output, which every tp rank
// holds whole after the experts' partial sums. Backward all-gathers the
// output gradient blocks (the module's backward needs dy for every token),
// runs the module's backward, whose input gradient is again whole and the
// same on every tp rank, and keeps this rank's block: no reduction, since
// nothing of it is partial. Two all-gathers of (B, T/tp, C) per call.
//
// The wrapper takes the module's place and name in the tree, like the
// recompute wrapper, so parameter names do not change.
#ifndef WEFT_STRATEGIES_TP_SEQUENCE_GATHERED_H_
#define WEFT_STRATEGIES_TP_SEQUENCE_GATHERED_H_

#include <string>

#include "core/nn/module.h"
#include "strategies/tp/tp_comm.h"

namespace weft::tp {

class SequenceGathered : public Module {
 public:
  absl::StatusOr<Tensor> Forward(RunContext& ctx, const Tensor& x) override;
  absl::StatusOr<Tensor> Backward(RunContext& ctx, const Tensor& dy) override;

  Module* inner() const { return child(""); }

  // Wraps `parent`'s swappable child `child`.
  static absl::Status Wrap(Module& parent, const std::string& child, const TpComm& tp);

 private:
  explicit SequenceGathered(TpComm tp) : Module("SequenceGathered"), tp_(std::move(tp)) {}
  // This rank's block along T of a gathered (B, T, ...) tensor.
  absl::StatusOr<Tensor> OwnBlock(RunContext& ctx, const Tensor& full) const;

  const TpComm tp_;
};

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_SEQUENCE_GATHERED_H_
