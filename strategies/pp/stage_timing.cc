#include "strategies/pp/stage_timing.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"

namespace weft::pp {
namespace {

// A slot no schedule uses, so the probe's activations never mix with a
// micro-batch's.
constexpr int kProbeSlot = 1 << 20;

using Clock = std::chrono::steady_clock;

// Waits for the work queued on the context's stream (a blocking copy of
// one element to the host).
absl::Status Drain(const RunContext& ctx, const Tensor& probe) {
  return probe.To(Device::Cpu(), ctx.stream).status();
}

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

absl::StatusOr<std::vector<double>> MeasureStageMs(Model& model, const std::vector<Stage>& stages,
                                                   RunContext ctx, int repeats) {
  WEFT_ASSIGN_OR_RETURN(auto sample, model.ProbeInputs(ctx));
  // The part the stages run on (a cp rank's chunks), as in training.
  WEFT_ASSIGN_OR_RETURN(StageBatch batch, model.LocalBatch(ctx, sample.first, sample.second));
  SequenceScope sequence(ctx, batch.sequence);
  WEFT_ASSIGN_OR_RETURN(Tensor probe, ctx.Zeros({1}, DType::kF32));
  ctx.training = true;
  ctx.slot = kProbeSlot;
  const int n = static_cast<int>(stages.size());
  std::vector<std::vector<double>> runs(n);
  for (int r = 0; r < repeats; ++r) {
    std::vector<double> ms(n, 0);
    Tensor x = batch.inputs;
    for (int s = 0; s < n; ++s) {
      const auto t0 = Clock::now();
      LossInputs loss;
      if (s == n - 1) loss = {&batch.targets, 1.0f};
      WEFT_ASSIGN_OR_RETURN(x, ForwardStages(ctx, stages, s, s + 1, x, loss));
      WEFT_RETURN_IF_ERROR(Drain(ctx, probe));
      ms[s] += Ms(t0, Clock::now());
    }
    Tensor dy;  // the loss stage starts from its own loss
    for (int s = n - 1; s >= 0; --s) {
      const auto t0 = Clock::now();
      WEFT_ASSIGN_OR_RETURN(dy, BackwardStages(ctx, stages, s, s + 1, dy));
      WEFT_RETURN_IF_ERROR(Drain(ctx, probe));
      ms[s] += Ms(t0, Clock::now());
    }
    ctx.store().DropSlot(kProbeSlot);
    for (int s = 0; s < n; ++s) runs[s].push_back(ms[s]);
  }
  WEFT_RETURN_IF_ERROR(ZeroGrads(model, ctx.stream));
  std::vector<double> median(n);
  for (int s = 0; s < n; ++s) {
    std::sort(runs[s].begin(), runs[s].end());
    median[s] = runs[s][runs[s].size() / 2];
  }
  return median;
}

}  // namespace weft::pp
