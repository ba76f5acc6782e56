// Under sequence parallelism a replicated module that runs on sequence
// shards (a LayerNorm) sees only this rank's tokens: its parameter
// gradients are partial sums. Hooks reduce them over tp per backward: the
// module accumulates into a zeroed buffer, which is all-reduced and added
// to the real gradient, so it works under gradient accumulation and under
// fsdp's per-micro-batch gradient buffers alike.
#ifndef WEFT_STRATEGIES_TP_SEQUENCE_GRADS_H_
#define WEFT_STRATEGIES_TP_SEQUENCE_GRADS_H_

#include "absl/status/status.h"
#include "core/nn/module.h"
#include "strategies/tp/tp_comm.h"

namespace weft::tp {

// Installs the hooks on `m` (its own held parameters).
void ReduceGradsOverTp(Module& m, const TpComm& tp);

}  // namespace weft::tp

#endif  // WEFT_STRATEGIES_TP_SEQUENCE_GRADS_H_
