// TrackingAllocator: forwards to another allocator and keeps its own exact
// statistics, so one category of memory (parameters, gradients, optimizer
// state, activations) can be measured on a device shared with others.
#ifndef WEFT_CORE_TENSOR_TRACKING_ALLOCATOR_H_
#define WEFT_CORE_TENSOR_TRACKING_ALLOCATOR_H_

#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "core/tensor/allocator.h"

namespace weft {

class TrackingAllocator : public Allocator {
 public:
  TrackingAllocator(std::string name, Allocator* base) : name_(std::move(name)), base_(base) {}

  absl::StatusOr<void*> Allocate(size_t bytes, NativeStream stream) override;
  void Free(void* ptr) override;
  absl::Status RecordStream(void* ptr, NativeStream stream) override {
    return base_->RecordStream(ptr, stream);
  }
  // allocated_* count this allocator's live bytes; reserved_* equal them
  // (the base allocator's cache is not attributed to any one category).
  AllocatorStats Stats() const override { return stats_.Get(); }
  void ResetPeak() override { stats_.ResetPeak(); }
  Device device() const override { return base_->device(); }
  bool pinned() const override { return base_->pinned(); }
  std::string Name() const override { return name_; }

 private:
  const std::string name_;
  Allocator* const base_;
  StatsCounter stats_;
  std::mutex mu_;
  absl::flat_hash_map<void*, size_t> sizes_;
};

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_TRACKING_ALLOCATOR_H_
