#include "core/tensor/cpu_allocator.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft {

absl::StatusOr<void*> CpuAlignedAllocator::Allocate(size_t bytes, NativeStream) {
  if (bytes == 0) bytes = 1;  // a valid, unique pointer even for empty tensors
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  if (ptr == nullptr) {
    return MakeError(absl::StatusCode::kResourceExhausted,
                     absl::StrCat(name_, ": out of host memory allocating ", bytes, " bytes"),
                     "", absl::StrCat("currently ", stats_.Get().ToString()));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[ptr] = bytes;
  }
  stats_.OnReserve(static_cast<int64_t>(rounded));
  stats_.OnAlloc(static_cast<int64_t>(bytes));
  return ptr;
}

void CpuAlignedAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(ptr);
    WEFT_CHECK(it != sizes_.end()) << name_ << ": Free of a pointer it did not allocate";
    bytes = it->second;
    sizes_.erase(it);
  }
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  std::free(ptr);
  stats_.OnFree(static_cast<int64_t>(bytes));
  stats_.OnRelease(static_cast<int64_t>(rounded));
}

}  // namespace weft
