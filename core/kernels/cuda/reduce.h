// Deterministic reductions to one f32 on the device: Sum of a tensor and
// SumSquares over many tensors (the global gradient norm). Two stages: fixed
// per-block partials (the block layout depends only on sizes), then one
// block adds the partials in order. No atomics, no host sync.
#ifndef WEFT_CORE_KERNELS_CUDA_REDUCE_H_
#define WEFT_CORE_KERNELS_CUDA_REDUCE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/tensor/dtype.h"

namespace weft::cuda {

int64_t SumScratchFloats(int64_t n);
// *out = sum(x) (or += with accumulate); x is kF32 or kBF16.
absl::Status LaunchSum(float* out, const void* x, DType dtype, int64_t n, bool accumulate,
                       float* scratch, cudaStream_t stream);

struct ReduceInput {
  const void* data;
  DType dtype;  // kF32 or kBF16
  int64_t n;
};

int64_t SumSquaresScratchFloats(absl::Span<const ReduceInput> inputs);
// *out = sum over inputs of sum(x^2), in f32.
absl::Status LaunchSumSquares(float* out, absl::Span<const ReduceInput> inputs, float* scratch,
                              cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_REDUCE_H_
