// What the kernel launchers ask of the current GPU (compute capability,
// shared-memory limits), queried once per device and cached: launchers run
// every step, the answers never change.
#ifndef WEFT_CORE_KERNELS_CUDA_DEVICE_INFO_H_
#define WEFT_CORE_KERNELS_CUDA_DEVICE_INFO_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace weft::cuda {

struct DeviceInfo {
  int index = 0;  // the CUDA device
  int major = 0, minor = 0;  // compute capability
  int64_t smem_per_block_optin = 0;  // the most one block may opt in to, bytes
  int64_t smem_per_sm = 0;           // an SM's shared memory, bytes
};

// The current device's (cudaGetDevice).
absl::StatusOr<DeviceInfo> CurrentDeviceInfo();

}  // namespace weft::cuda

#endif  // WEFT_CORE_KERNELS_CUDA_DEVICE_INFO_H_
