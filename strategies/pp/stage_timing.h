// Stage timing: each stage's forward + backward time on one probe sample,
// measured on this rank before a pipeline split (--pp_split=time), so the
// split balances time rather than parameter counts (an embedding has many
// parameters and little work; attention's work grows with T, not with its
// parameters).
#ifndef WEFT_STRATEGIES_PP_STAGE_TIMING_H_
#define WEFT_STRATEGIES_PP_STAGE_TIMING_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/nn/model.h"
#include "core/nn/stage.h"

namespace weft::pp {

// Median over `repeats` runs of each stage's forward + backward
// milliseconds (device-synchronized) on model.ProbeInputs(), narrowed to
// the part the stages take (model.LocalBatch, e.g. cp's chunks; the cp
// ranks then time their ring exchanges together). Uses a spare
// activation slot and leaves every gradient zero.
absl::StatusOr<std::vector<double>> MeasureStageMs(Model& model, const std::vector<Stage>& stages,
                                                   RunContext ctx, int repeats = 3);

}  // namespace weft::pp

#endif  // WEFT_STRATEGIES_PP_STAGE_TIMING_H_
