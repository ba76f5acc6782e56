// The CPU device backend: synchronous copies, and "events" that record host
// timestamps so step timers and the profiler work the same way on CPU.
#include <chrono>
#include <cstring>

#include "core/base/errors.h"
#include "core/tensor/allocator.h"
#include "core/tensor/cpu_copy.h"
#include "core/tensor/device_backend.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

class CpuBackend : public DeviceBackend {
 public:
  DeviceType type() const override { return DeviceType::kCPU; }
  absl::StatusOr<int> DeviceCount() override { return 1; }
  absl::StatusOr<Allocator*> GetAllocator(int) override { return CpuAllocator(); }
  Allocator* PinnedHostAllocator() override { return nullptr; }

  absl::StatusOr<NativeStream> CreateStream(int, int) override { return nullptr; }
  void DestroyStream(int, NativeStream) override {}
  absl::Status SynchronizeStream(int, NativeStream) override { return absl::OkStatus(); }

  absl::StatusOr<NativeEvent> CreateEvent(int, bool) override { return new Clock::time_point(); }
  void DestroyEvent(int, NativeEvent event) override {
    delete static_cast<Clock::time_point*>(event);
  }
  absl::Status RecordEvent(int, NativeEvent event, NativeStream) override {
    *static_cast<Clock::time_point*>(event) = Clock::now();
    return absl::OkStatus();
  }
  absl::Status StreamWaitEvent(int, NativeStream, NativeEvent) override {
    return absl::OkStatus();
  }
  absl::StatusOr<bool> QueryEvent(int, NativeEvent) override { return true; }
  absl::Status SynchronizeEvent(int, NativeEvent) override { return absl::OkStatus(); }
  absl::StatusOr<float> ElapsedMs(int, NativeEvent start, NativeEvent end) override {
    const auto d = *static_cast<Clock::time_point*>(end) - *static_cast<Clock::time_point*>(start);
    return std::chrono::duration<float, std::milli>(d).count();
  }

  absl::Status Copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t bytes, NativeStream, bool) override {
    if (!dst_device.is_cpu() || !src_device.is_cpu()) {
      return Internal("CPU backend asked to copy to or from " +
                      (dst_device.is_cpu() ? src_device : dst_device).ToString());
    }
    if (bytes > 0) std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyStrided(int, const StridedView& dst, const StridedView& src,
                           NativeStream) override {
    return CpuCopyStrided(dst, src);
  }
  absl::Status Memset(int, void* dst, int value, size_t bytes, NativeStream) override {
    if (bytes > 0) std::memset(dst, value, bytes);
    return absl::OkStatus();
  }
};

const bool kRegistered = RegisterDeviceBackendAtStartup(std::make_unique<CpuBackend>());

}  // namespace
}  // namespace weft
