// A one-warpgroup product through wgmma.cuh's helpers, for wgmma_test: it
// checks the fragment layouts, the core-matrix layout and the descriptor
// against a CPU product in isolation, so a failure in the wgmma attention
// kernel can be told apart from a failure of the building blocks.
#ifndef WEFT_CORE_KERNELS_CUDA_WGMMA_PROBE_H_
#define WEFT_CORE_KERNELS_CUDA_WGMMA_PROBE_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace weft::cuda {

// How the probe brings B into the core-matrix layout.
enum class WgmmaProbeB {
  kKMajor,            // given n x k row-major (B's columns contiguous): LoadCoreTileAsync
  kTransposed,        // given k x n row-major: staged, then TransposeToCoreLayout
  kTransposedFromCore,  // given k x n: loaded as a k x n core tile, then transposed from it
  kNMajor,  // given k x n: loaded as a k x n core tile, read as is with the B-transpose bit
};

// d (64 x n, f32, row-major) = a (64 x k, bf16, row-major) · B, with b
// holding B as `how` says. n in {32, 64, 128}, k in {16, 64}. sm_90a only.
absl::Status LaunchWgmmaProbe(float* d, const void* a, const void* b, int n, int k,
                              WgmmaProbeB how, cudaStream_t stream);

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_WGMMA_PROBE_H_
