// Multi-tensor launches: many tensors (parameters, gradients) processed by
// one kernel launch, each block owning a fixed chunk of one tensor.
//
// Tensor descriptors travel as a kernel parameter (by value, < 4 KiB), not
// through a device buffer: parameters are copied at launch, so there is no
// staging buffer whose lifetime must outlive an asynchronous copy, nothing
// for the host to wait on, and CUDA graph capture records them as they are.
// More tensors than fit go in several launches (kMaxTensorsPerLaunch each).
// The block -> (tensor, chunk) map depends only on tensor sizes, so results
// never depend on the GPU model.
#ifndef WEFT_CORE_KERNELS_CUDA_MULTI_TENSOR_CUH_
#define WEFT_CORE_KERNELS_CUDA_MULTI_TENSOR_CUH_

#include <cstdint>

#include "core/kernels/cuda/common.cuh"

namespace weft::cuda {

constexpr int kMaxTensorsPerLaunch = 64;

// block_start[s] is the first block of tensor s in this launch; block_start
// [count] the launch's block count.
struct BlockMap {
  int32_t block_start[kMaxTensorsPerLaunch + 1];
  int32_t count;
};

// The tensor that block `blk` works on. Linear scan: at most 64 steps, the
// same for every thread of a block.
__device__ __forceinline__ int TensorOfBlock(const BlockMap& map, int blk) {
  int s = 0;
  while (s + 1 < map.count && map.block_start[s + 1] <= blk) ++s;
  return s;
}

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_MULTI_TENSOR_CUH_
