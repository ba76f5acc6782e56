#include "core/kernels/cuda/device_info.h"

#include <cuda_runtime.h>

#include <array>
#include <mutex>
#include <optional>

#include "core/base/status_macros.h"
#include "core/tensor/cuda/cuda_check.h"

namespace weft::cuda {

absl::StatusOr<DeviceInfo> CurrentDeviceInfo() {
  static std::mutex mu;
  static std::array<std::optional<DeviceInfo>, 64> known;
  int device = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  const bool cacheable = device >= 0 && device < static_cast<int>(known.size());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(mu);
    if (known[device].has_value()) return *known[device];
  }
  DeviceInfo info;
  info.index = device;
  int block = 0, sm = 0;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device));
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&info.minor, cudaDevAttrComputeCapabilityMinor, device));
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  info.smem_per_block_optin = block;
  info.smem_per_sm = sm;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(mu);
    known[device] = info;
  }
  return info;
}

}  // namespace weft::cuda
