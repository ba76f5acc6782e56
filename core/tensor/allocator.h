// Allocator: the one interface every memory source implements (CPU, pinned
// host, CUDA caching), with exact statistics. Later layers prove memory
// savings (ZeRO, FSDP) from these numbers, so they count bytes precisely:
//   allocated_bytes  sum of the sizes callers asked for, for live blocks
//   reserved_bytes   memory held from the system (>= allocated; caches count)
//   peak_*           high-water marks since construction or ResetPeak()
//   num_allocs/frees calls that succeeded
#ifndef WEFT_CORE_TENSOR_ALLOCATOR_H_
#define WEFT_CORE_TENSOR_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor/device.h"

namespace weft {

struct AllocatorStats {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
  std::string ToString() const;
};

// Opaque native stream handle (cudaStream_t on CUDA, nullptr on CPU).
using NativeStream = void*;

class Allocator {
 public:
  virtual ~Allocator() = default;

  // Returns memory for `bytes` (> 0) usable on `stream`. Thread-safe.
  virtual absl::StatusOr<void*> Allocate(size_t bytes, NativeStream stream = nullptr) = 0;
  // Releases a pointer returned by Allocate. nullptr is a no-op.
  virtual void Free(void* ptr) = 0;
  // Declares that `ptr` is also used on `stream`, so it is not reused until
  // work queued there before the Free has finished. No-op where streams do not exist.
  virtual absl::Status RecordStream(void* ptr, NativeStream stream) {
    (void)ptr;
    (void)stream;
    return absl::OkStatus();
  }

  virtual AllocatorStats Stats() const = 0;
  virtual void ResetPeak() = 0;
  virtual Device device() const = 0;
  // True when the memory is page-locked host memory usable for async copies.
  virtual bool pinned() const { return false; }
  virtual std::string Name() const = 0;
  // Where Tensor::Clone puts copies of this allocator's tensors: here, but
  // an allocator that lends one fixed buffer names another.
  virtual Allocator* ForCopies() { return this; }
};

// Thread-safe bookkeeping shared by allocator implementations.
class StatsCounter {
 public:
  void OnAlloc(int64_t bytes);
  void OnFree(int64_t bytes);
  void OnReserve(int64_t bytes);
  void OnRelease(int64_t bytes);
  AllocatorStats Get() const;
  void ResetPeak();

 private:
  mutable std::mutex mu_;
  AllocatorStats stats_;
};

// Process-wide allocators. These are deliberate singletons, like the device
// itself: memory is a per-process resource, unlike groups or configs.
Allocator* CpuAllocator();
// Page-locked host memory from the CUDA backend when a GPU is present; the
// aligned CPU allocator otherwise (its pinned() then reports false).
Allocator* PinnedHostAllocator();
// The default allocator for a device; an error names a missing backend.
absl::StatusOr<Allocator*> DefaultAllocator(Device device);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_ALLOCATOR_H_
