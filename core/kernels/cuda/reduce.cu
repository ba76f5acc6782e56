// Sum and SumSquares; see reduce.h for the determinism argument.
#include <algorithm>

#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/multi_tensor.cuh"
#include "core/kernels/cuda/reduce.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSumBlocks = 1024;
constexpr int64_t kSumSqChunk = kThreads * 16;  // elements per SumSquares block
constexpr int kFinalThreads = 1024;

template <typename T>
__global__ void SumPartialsKernel(float* __restrict__ partials, const T* __restrict__ x,
                                  int64_t n) {
  __shared__ float scratch[kWarpSize];
  float acc = 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    acc += ToF(x[i]);
  }
  acc = BlockSum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

struct SumSqBatch {
  BlockMap map;
  const void* data[kMaxTensorsPerLaunch];
  int64_t n[kMaxTensorsPerLaunch];
  uint8_t bf16[kMaxTensorsPerLaunch];
};

__global__ void SumSquaresPartialsKernel(float* __restrict__ partials, const SumSqBatch batch) {
  __shared__ float scratch[kWarpSize];
  const int blk = blockIdx.x;
  const int s = TensorOfBlock(batch.map, blk);
  const int64_t begin = int64_t(blk - batch.map.block_start[s]) * kSumSqChunk;
  const int64_t end = min(batch.n[s], begin + kSumSqChunk);
  float acc = 0.0f;
  if (batch.bf16[s]) {
    const bf16* p = static_cast<const bf16*>(batch.data[s]);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float v = ToF(p[i]);
      acc += v * v;
    }
  } else {
    const float* p = static_cast<const float*>(batch.data[s]);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += p[i] * p[i];
  }
  acc = BlockSum(acc, scratch);
  if (threadIdx.x == 0) partials[blk] = acc;
}

// One block: thread t adds partials t, t + 1024, ... in order, then a fixed
// tree over threads.
__global__ void FinalizeKernel(float* __restrict__ out, const float* __restrict__ partials,
                               int64_t count, bool accumulate) {
  __shared__ float scratch[kWarpSize];
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = BlockSum(acc, scratch);
  if (threadIdx.x == 0) *out = accumulate ? *out + acc : acc;
}

int SumBlocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(CeilDiv(n, kThreads * 8), 1, kMaxSumBlocks));
}

}  // namespace

int64_t SumScratchFloats(int64_t n) { return SumBlocks(n); }

absl::Status LaunchSum(float* out, const void* x, DType dtype, int64_t n, bool accumulate,
                       float* scratch, cudaStream_t stream) {
  const int blocks = SumBlocks(n);
  if (dtype == DType::kF32) {
    SumPartialsKernel<<<blocks, kThreads, 0, stream>>>(scratch, static_cast<const float*>(x), n);
  } else {
    SumPartialsKernel<<<blocks, kThreads, 0, stream>>>(scratch, static_cast<const bf16*>(x), n);
  }
  WEFT_RETURN_IF_ERROR(CheckLaunch("SumPartialsKernel"));
  FinalizeKernel<<<1, kFinalThreads, 0, stream>>>(out, scratch, blocks, accumulate);
  return CheckLaunch("FinalizeKernel");
}

int64_t SumSquaresScratchFloats(absl::Span<const ReduceInput> inputs) {
  int64_t blocks = 0;
  for (const ReduceInput& in : inputs) blocks += CeilDiv(in.n, kSumSqChunk);
  return std::max<int64_t>(blocks, 1);
}

absl::Status LaunchSumSquares(float* out, absl::Span<const ReduceInput> inputs, float* scratch,
                              cudaStream_t stream) {
  int64_t written = 0;  // partials filled by earlier launches
  for (size_t first = 0; first < inputs.size(); first += kMaxTensorsPerLaunch) {
    const size_t count = std::min<size_t>(kMaxTensorsPerLaunch, inputs.size() - first);
    SumSqBatch batch{};
    int64_t blocks = 0;
    for (size_t s = 0; s < count; ++s) {
      const ReduceInput& in = inputs[first + s];
      batch.map.block_start[s] = static_cast<int32_t>(blocks);
      batch.data[s] = in.data;
      batch.n[s] = in.n;
      batch.bf16[s] = in.dtype == DType::kBF16;
      blocks += CeilDiv(in.n, kSumSqChunk);
    }
    batch.map.block_start[count] = static_cast<int32_t>(blocks);
    batch.map.count = static_cast<int32_t>(count);
    if (blocks == 0) continue;
    SumSquaresPartialsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        scratch + written, batch);
    WEFT_RETURN_IF_ERROR(CheckLaunch("SumSquaresPartialsKernel"));
    written += blocks;
  }
  FinalizeKernel<<<1, kFinalThreads, 0, stream>>>(out, scratch, written, false);
  return CheckLaunch("FinalizeKernel");
}

}  // namespace weft::cuda
