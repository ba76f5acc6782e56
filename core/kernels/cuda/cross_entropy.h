// Fused softmax + cross-entropy over the first `vocab` of `padded_vocab`
// logit columns, one block per row. Logits are kF32 or kBF16; losses f32;
// targets i32. Targets < 0 are ignored (loss 0, zero gradient row). Targets
// >= vocab cannot be reported without a host sync: their loss is NaN (so
// the run visibly fails) and their gradient row is zero.
#ifndef WEFT_CORE_KERNELS_CUDA_CROSS_ENTROPY_H_
#define WEFT_CORE_KERNELS_CUDA_CROSS_ENTROPY_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

// losses (rows) = logsumexp(logits[r, :vocab]) - logits[r, target]. With
// compute_grad, logits are overwritten in place by
// dloss_scale * (softmax - onehot), padded columns by 0.
absl::Status LaunchCrossEntropy(float* losses, void* logits, DType dtype, const int32_t* targets,
                                int64_t rows, int64_t vocab, int64_t padded_vocab,
                                float dloss_scale, bool compute_grad, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_CROSS_ENTROPY_H_
