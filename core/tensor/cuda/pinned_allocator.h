// CudaPinnedAllocator: page-locked host memory (cudaHostAlloc, portable to
// every GPU) so host-to-device copies can run asynchronously on a copy
// stream. Pinning is expensive, so callers such as the data loader allocate
// once and reuse buffers as a ring.
#ifndef WEFT_CORE_TENSOR_CUDA_PINNED_ALLOCATOR_H_
#define WEFT_CORE_TENSOR_CUDA_PINNED_ALLOCATOR_H_

#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "core/tensor/allocator.h"

namespace weft::cuda {

class CudaPinnedAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes, NativeStream stream) override;
  void Free(void* ptr) override;
  AllocatorStats Stats() const override { return stats_.Get(); }
  void ResetPeak() override { stats_.ResetPeak(); }
  Device device() const override { return Device::Cpu(); }
  bool pinned() const override { return true; }
  std::string Name() const override { return "cuda-pinned-host"; }

 private:
  StatsCounter stats_;
  std::mutex mu_;
  absl::flat_hash_map<void*, size_t> sizes_;
};

}  // namespace weft::cuda

#endif  // WEFT_CORE_TENSOR_CUDA_PINNED_ALLOCATOR_H_
