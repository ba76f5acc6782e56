#include "core/tensor/tracking_allocator.h"

#include "core/base/check.h"

namespace weft {

absl::StatusOr<void*> TrackingAllocator::Allocate(size_t bytes, NativeStream stream) {
  absl::StatusOr<void*> p = base_->Allocate(bytes, stream);
  if (!p.ok()) return p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[*p] = bytes;
  }
  stats_.OnReserve(static_cast<int64_t>(bytes));
  stats_.OnAlloc(static_cast<int64_t>(bytes));
  return p;
}

void TrackingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(ptr);
    WEFT_CHECK(it != sizes_.end()) << name_ << ": Free of a pointer it did not allocate";
    bytes = it->second;
    sizes_.erase(it);
  }
  base_->Free(ptr);
  stats_.OnFree(static_cast<int64_t>(bytes));
  stats_.OnRelease(static_cast<int64_t>(bytes));
}

}  // namespace weft
