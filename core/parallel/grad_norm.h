// The squared global gradient norm, placement-aware, before the
// data-parallel strategies complete it (StepParticipant::ReduceGradNormSq).
//
// A target whose parameter is split over tp holds a disjoint part of the
// gradient: its squares are summed over the model-parallel (tp) group. A replicated target
// holds the same gradient on every rank of that group: counted once.
// Flat shards over data-parallel axes are the participants' business.
#ifndef WEFT_CORE_PARALLEL_GRAD_NORM_H_
#define WEFT_CORE_PARALLEL_GRAD_NORM_H_

#include <vector>

#include "absl/status/status.h"
#include "comm/process_group/process_group.h"
#include "core/kernels/kernel_ops.h"
#include "core/optim/optimizer.h"

namespace weft {

// out (one f32 element on the device) = this rank's contribution to the
// squared norm, complete over `model_parallel` (null or size 1: no
// model-parallel axis). Collective over `model_parallel` when any rank may
// hold sharded targets: every rank of the group must call it.
absl::Status GradNormSquared(KernelOps& ops, const KernelContext& ctx,
                             const std::vector<OptimTarget>& targets,
                             comm::ProcessGroup* model_parallel, Tensor& out);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_GRAD_NORM_H_
