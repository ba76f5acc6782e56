#include "core/parallel/parallel_state.h"

#include "core/base/status_macros.h"

namespace weft {

absl::Status ParallelState::SumLoss(Tensor& t, NativeStream stream) const {
  // Ordered after the work already queued on `stream` (the compute stream
  // that produced `t`), and `stream` waits for the result; without the
  // stream NCCL would order the op on the legacy default stream, which the
  // non-blocking compute stream does not synchronize with.
  for (const auto& group : loss_groups) {
    WEFT_RETURN_IF_ERROR(
        group->AllReduce(t, {.op = comm::ReduceOp::kSum, .stream = stream})->Wait());
  }
  return absl::OkStatus();
}

}  // namespace weft
