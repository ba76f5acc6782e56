// A one-warpgroup product through wgmma.cuh's helpers, for wgmma_test: it
// checks the fragment layouts, the core-matrix layout and the descriptor
// against a CPU product in isolation, so a failure in the wgmma attention
// kernel can be told apart from a failure of the building blocks.
#ifndef WEFT_CORE_KERNELS_CUDA_WGMMA_PROBE_H_
#define WEFT_CORE_KERNELS_CUDA_WGMMA_PROBE_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace weft::cuda {

// d (64 x n, f32, row-major) = a (64 x k, bf16, row-major) · B, with B given
// either as bt (n x k row-major: each column of B contiguous, loaded by
// LoadCoreTileAsync) or, with `transposed`, as b (k x n row-major, moved by
// TransposeToCoreLayout). n in {32, 64, 128}, k in {16, 64}. sm_90a only.
absl::Status LaunchWgmmaProbe(float* d, const void* a, const void* b, int n, int k,
                              bool transposed, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_WGMMA_PROBE_H_
