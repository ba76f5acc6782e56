// Device: where a tensor's memory lives ("cpu", "cuda:0"), or "meta": shapes
// only, no memory and no kernels (the memory estimator's dry runs).
#ifndef WEFT_CORE_TENSOR_DEVICE_H_
#define WEFT_CORE_TENSOR_DEVICE_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace weft {

enum class DeviceType : uint8_t { kCPU, kCUDA, kMeta };
inline constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device Cpu() { return {DeviceType::kCPU, 0}; }
  static Device Cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  static Device Meta() { return {DeviceType::kMeta, 0}; }

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  bool is_meta() const { return type == DeviceType::kMeta; }
  std::string ToString() const;  // "cpu", "cuda:N" or "meta"

  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && (a.type != DeviceType::kCUDA || a.index == b.index);
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

// Accepts "cpu", "cuda" (= cuda:0), "cuda:N" and "meta".
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_DEVICE_H_
