// Maps the result of a device-count query (cudaGetDeviceCount) to a count or
// an error. Pure and CUDA-free so the rule is tested on CPU-only machines.
//
// Only "no device" means zero devices. A driver problem (no driver, driver
// older than the runtime, ...) is reported as the driver error, not as "0
// devices", which used to read as "cuda:0 does not exist".
#ifndef WEFT_CORE_TENSOR_DEVICE_COUNT_STATUS_H_
#define WEFT_CORE_TENSOR_DEVICE_COUNT_STATUS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace weft {

// CUDA runtime error codes this rule needs (checked against cuda_runtime_api.h
// by static_asserts in the CUDA backend).
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorInsufficientDriver = 35;
inline constexpr int kCudaErrorNoDevice = 100;

// `err` is the runtime's error code, `count` what it wrote, `name`/`text`
// cudaGetErrorName/cudaGetErrorString of `err`.
absl::StatusOr<int> DeviceCountFromResult(int err, int count, absl::string_view name,
                                          absl::string_view text);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_DEVICE_COUNT_STATUS_H_
