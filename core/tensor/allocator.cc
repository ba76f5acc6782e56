#include "core/tensor/allocator.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/tensor/cpu_allocator.h"
#include "core/tensor/device_backend.h"

namespace weft {

std::string AllocatorStats::ToString() const {
  return absl::StrFormat(
      "allocated=%d reserved=%d peak_allocated=%d peak_reserved=%d allocs=%d frees=%d",
      allocated_bytes, reserved_bytes, peak_allocated_bytes, peak_reserved_bytes, num_allocs,
      num_frees);
}

void StatsCounter::OnAlloc(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes += bytes;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  ++stats_.num_allocs;
}

void StatsCounter::OnFree(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes -= bytes;
  ++stats_.num_frees;
}

void StatsCounter::OnReserve(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.reserved_bytes += bytes;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
}

void StatsCounter::OnRelease(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.reserved_bytes -= bytes;
}

AllocatorStats StatsCounter::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void StatsCounter::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

Allocator* CpuAllocator() {
  static auto* allocator = new CpuAlignedAllocator("cpu");
  return allocator;
}

Allocator* PinnedHostAllocator() {
  static Allocator* allocator = [] () -> Allocator* {
    auto backend = GetDeviceBackend(DeviceType::kCUDA);
    if (backend.ok()) {
      auto count = (*backend)->DeviceCount();
      Allocator* pinned = (*backend)->PinnedHostAllocator();
      if (count.ok() && *count > 0 && pinned != nullptr) return pinned;
    }
    // No GPU: there is nothing to copy to asynchronously, so plain aligned
    // host memory serves, and pinned() tells callers which one they got.
    return new CpuAlignedAllocator("pinned-fallback(no GPU)");
  }();
  return allocator;
}

absl::StatusOr<Allocator*> DefaultAllocator(Device device) {
  if (device.is_cpu()) return CpuAllocator();
  auto backend = GetDeviceBackend(device.type);
  if (!backend.ok()) return backend.status();
  return (*backend)->GetAllocator(device.index);
}

}  // namespace weft
