#include "core/tensor/cuda/pinned_allocator.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/tensor/cuda/cuda_check.h"

namespace weft::cuda {

absl::StatusOr<void*> CudaPinnedAllocator::Allocate(size_t bytes, NativeStream) {
  if (bytes == 0) bytes = 1;
  void* ptr = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable));
  {
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[ptr] = bytes;
  }
  stats_.OnReserve(static_cast<int64_t>(bytes));
  stats_.OnAlloc(static_cast<int64_t>(bytes));
  return ptr;
}

void CudaPinnedAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(ptr);
    WEFT_CHECK(it != sizes_.end()) << "pinned Free of a pointer it did not allocate";
    bytes = it->second;
    sizes_.erase(it);
  }
  (void)cudaFreeHost(ptr);
  stats_.OnFree(static_cast<int64_t>(bytes));
  stats_.OnRelease(static_cast<int64_t>(bytes));
}

}  // namespace weft::cuda
