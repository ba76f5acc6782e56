// Mixture-of-experts routing kernels (the CUDA side of
// core/kernels/moe_ops.h): router softmax + top-k and its backward, the
// token permutation into expert order (GatherRows) and its weighted inverse
// (CombineRows), and the gate gradients (RowDots). Activations are f32 or
// bf16 (`dtype`); probabilities, gates and their gradients f32; indices i32.
// Every output element is computed by one thread (or one warp), with no
// atomics, so results are deterministic.
#ifndef WEFT_CORE_KERNELS_CUDA_MOE_H_
#define WEFT_CORE_KERNELS_CUDA_MOE_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

// One thread per token; k <= 2.
// The most choices per token the router kernels hold (moe_ops.h's
// kMaxRouterTopK; this header stays free of it for nvcc).
inline constexpr int kRouterMaxTopK = 16;

// k <= kRouterMaxTopK; sigmoid: per-logit sigmoid scores instead of the
// softmax; normalize: gates renormalised over the k choices.
absl::Status LaunchRouterTopK(float* probs, float* lse, int32_t* idx, float* gates,
                              const void* logits, DType dtype, int64_t n, int e, int k,
                              bool sigmoid, bool normalize, cudaStream_t stream);
// dprobs_extra may be null.
absl::Status LaunchRouterTopKBackward(void* dlogits, DType dtype, const float* dgates,
                                      const float* probs, const float* lse, const int32_t* idx,
                                      const float* dprobs_extra, float lse_scale, int64_t n,
                                      int e, int k, bool sigmoid, bool normalize,
                                      cudaStream_t stream);
// out (m, c) row i = w[assign[i]] * x row assign[i] / k; weights may be null.
absl::Status LaunchGatherRows(void* out, const void* x, const int32_t* assign,
                              const float* weights, DType dtype, int64_t m, int64_t c, int k,
                              cudaStream_t stream);
// out (n, c) [+]= sum_j w[n, j] * src row slots[n, j] (slots >= 0); weights may be null.
absl::Status LaunchCombineRows(void* out, const void* src, const int32_t* slots,
                               const float* weights, DType dtype, int64_t n, int64_t c, int k,
                               bool accumulate, cudaStream_t stream);
// out (n, k) = <dy row n, src row slots[n, j]>, 0 when dropped.
absl::Status LaunchRowDots(float* out, const void* dy, const void* src, const int32_t* slots,
                           DType dtype, int64_t n, int64_t c, int k, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_MOE_H_
