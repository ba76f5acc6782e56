// Device: where a tensor's memory lives ("cpu", "cuda:0").
#ifndef WEFT_CORE_TENSOR_DEVICE_H_
#define WEFT_CORE_TENSOR_DEVICE_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace weft {

enum class DeviceType : uint8_t { kCPU, kCUDA };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device Cpu() { return {DeviceType::kCPU, 0}; }
  static Device Cuda(int index = 0) { return {DeviceType::kCUDA, index}; }

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string ToString() const;  // "cpu" or "cuda:N"

  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && (a.type == DeviceType::kCPU || a.index == b.index);
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

// Accepts "cpu", "cuda" (= cuda:0) and "cuda:N".
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_DEVICE_H_
