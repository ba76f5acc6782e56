// The meta device backend: tensors with shapes, dtypes and exact allocator
// statistics but no memory. Addresses are unique and never dereferenced;
// copies and memsets do nothing, except that a copy into host memory fills
// it with zeros so host reads (a logged loss) see defined values. This is
// what lets the memory estimator run the real setup and step code of a
// model of any size on a laptop: every allocation is counted, none is made.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "core/base/check.h"
#include "core/base/errors.h"
#include "core/tensor/allocator.h"
#include "core/tensor/device_backend.h"

namespace weft {
namespace {

class MetaAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes, NativeStream) override {
    // Same rounding as the aligned CPU allocator, so views stay aligned.
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    const uintptr_t address = next_.fetch_add(rounded);
    {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[address] = bytes;
    }
    stats_.OnReserve(static_cast<int64_t>(bytes));
    stats_.OnAlloc(static_cast<int64_t>(bytes));
    return reinterpret_cast<void*>(address);
  }
  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(reinterpret_cast<uintptr_t>(ptr));
      WEFT_CHECK(it != sizes_.end()) << "meta: Free of a pointer it did not allocate";
      bytes = it->second;
      sizes_.erase(it);
    }
    stats_.OnFree(static_cast<int64_t>(bytes));
    stats_.OnRelease(static_cast<int64_t>(bytes));
  }
  AllocatorStats Stats() const override { return stats_.Get(); }
  void ResetPeak() override { stats_.ResetPeak(); }
  Device device() const override { return Device::Meta(); }
  std::string Name() const override { return "meta"; }

 private:
  // Far above any real mapping, so a stray dereference faults at once.
  std::atomic<uintptr_t> next_{uintptr_t{1} << 46};
  StatsCounter stats_;
  std::mutex mu_;
  absl::flat_hash_map<uintptr_t, size_t> sizes_;
};

class MetaBackend : public DeviceBackend {
 public:
  DeviceType type() const override { return DeviceType::kMeta; }
  absl::StatusOr<int> DeviceCount() override { return 1; }
  absl::StatusOr<Allocator*> GetAllocator(int) override { return &allocator_; }
  Allocator* PinnedHostAllocator() override { return nullptr; }

  absl::StatusOr<NativeStream> CreateStream(int, int) override { return nullptr; }
  void DestroyStream(int, NativeStream) override {}
  absl::Status SynchronizeStream(int, NativeStream) override { return absl::OkStatus(); }

  // Events carry no time: a dry run has no duration.
  absl::StatusOr<NativeEvent> CreateEvent(int, bool) override { return new char; }
  void DestroyEvent(int, NativeEvent event) override { delete static_cast<char*>(event); }
  absl::Status RecordEvent(int, NativeEvent, NativeStream) override { return absl::OkStatus(); }
  absl::Status StreamWaitEvent(int, NativeStream, NativeEvent) override {
    return absl::OkStatus();
  }
  absl::StatusOr<bool> QueryEvent(int, NativeEvent) override { return true; }
  absl::Status SynchronizeEvent(int, NativeEvent) override { return absl::OkStatus(); }
  absl::StatusOr<float> ElapsedMs(int, NativeEvent, NativeEvent) override { return 0.f; }

  absl::Status Copy(void* dst, Device dst_device, const void*, Device, size_t bytes,
                    NativeStream, bool) override {
    if (dst_device.is_cpu() && bytes > 0) std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyStrided(int, const StridedView&, const StridedView&, NativeStream) override {
    return absl::OkStatus();
  }
  absl::Status Memset(int, void*, int, size_t, NativeStream) override { return absl::OkStatus(); }

 private:
  MetaAllocator allocator_;
};

const bool kRegistered = RegisterDeviceBackendAtStartup(std::make_unique<MetaBackend>());

}  // namespace
}  // namespace weft
