// Host reduction kernels for the gloo backend.
//
// ReduceBlocks combines n blocks (block i came from rank i) strictly in rank
// order, so every rank computes bitwise the same result run after run.
// bf16 and f16 accumulate in float across all n blocks and round once at the
// end (more accurate than rounding after every pairwise step); integers wrap
// on overflow like two's complement. Max and min propagate NaN. kAvg is the
// float sum divided by n, rounded once.
#ifndef WEFT_COMM_GLOO_REDUCE_KERNELS_H_
#define WEFT_COMM_GLOO_REDUCE_KERNELS_H_

#include <cstdint>

#include "comm/process_group/reduce_op.h"
#include "core/tensor/dtype.h"

namespace weft::comm::gloo_internal {

// `blocks` holds n back-to-back blocks of `count` elements of `dtype`;
// writes the reduction to `out` (count elements; may not alias `blocks`).
// `dtype` must be reducible (not u16); kAvg needs a floating-point dtype.
void ReduceBlocks(DType dtype, ReduceOp op, const void* blocks, int n, int64_t count, void* out);

}  // namespace weft::comm::gloo_internal

#endif  // WEFT_COMM_GLOO_REDUCE_KERNELS_H_
