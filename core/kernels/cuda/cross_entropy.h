// Fused softmax + cross-entropy over the first `vocab` of `padded_vocab`
// logit columns, one block per row, and its vocabulary-parallel split
// (KernelOps::VocabCrossEntropy*: the same row passes per shard, around the
// caller's all-reduces). Logits are kF32 or kBF16; losses and row
// statistics f32; targets i32. Targets < 0 are ignored (loss 0, zero
// gradient row). Targets >= vocab cannot be reported without a host sync:
// their loss is NaN (so the run visibly fails) and their gradient row is zero.
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

// A shard's logits (rows, cols): global columns [vocab_begin, +cols), real
// below `vocab` (vocab_shard.h).
struct VocabShardArgs {
  const int32_t* targets = nullptr;  // (rows) global class ids
  DType dtype = DType::kF32;         // of the logits
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t vocab_begin = 0;
  int64_t vocab = 0;
};

// Per row: the shard's max (-inf without real columns), the sum of
// exp(z - that max), and the target's logit (0 when not held here). Rows of
// ignored or invalid targets: -inf, 0, 0.
absl::Status LaunchVocabCrossEntropyStats(const VocabShardArgs& args, const void* logits,
                                          float* row_max, float* sum_exp, float* target_logit,
                                          cudaStream_t stream);
// sum_exp[r] *= exp(row_max[r] - global_max[r]), 0 where row_max is -inf.
absl::Status LaunchVocabCrossEntropyRescale(float* sum_exp, const float* row_max,
                                            const float* global_max, int64_t rows,
                                            cudaStream_t stream);
// losses = global_max + log(sum_exp) - target_logit; with compute_grad the
// shard's logits become dloss_scale * (softmax - onehot), padding 0.
absl::Status LaunchVocabCrossEntropyFinish(const VocabShardArgs& args, void* logits,
                                           float* losses, const float* global_max,
                                           const float* sum_exp, const float* target_logit,
                                           float dloss_scale, bool compute_grad,
                                           cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_CROSS_ENTROPY_H_
