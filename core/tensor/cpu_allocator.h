// CpuAlignedAllocator: 64-byte aligned host memory with exact stats.
// Every block is aligned so vectorized kernels and DMA engines can use it.
#ifndef WEFT_CORE_TENSOR_CPU_ALLOCATOR_H_
#define WEFT_CORE_TENSOR_CPU_ALLOCATOR_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "core/tensor/allocator.h"

namespace weft {

class CpuAlignedAllocator : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;

  explicit CpuAlignedAllocator(std::string name) : name_(std::move(name)) {}
  ~CpuAlignedAllocator() override = default;

  absl::StatusOr<void*> Allocate(size_t bytes, NativeStream stream) override;
  void Free(void* ptr) override;
  AllocatorStats Stats() const override { return stats_.Get(); }
  void ResetPeak() override { stats_.ResetPeak(); }
  Device device() const override { return Device::Cpu(); }
  std::string Name() const override { return name_; }

 private:
  const std::string name_;
  StatsCounter stats_;
  std::mutex mu_;
  absl::flat_hash_map<void*, size_t> sizes_;  // requested bytes per live block
};

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_CPU_ALLOCATOR_H_
