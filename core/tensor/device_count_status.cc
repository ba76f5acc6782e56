#include "core/tensor/device_count_status.h"

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft {

absl::StatusOr<int> DeviceCountFromResult(int err, int count, absl::string_view name,
                                          absl::string_view text) {
  if (err == kCudaSuccess) return count;
  if (err == kCudaErrorNoDevice) return 0;
  const std::string what = absl::StrCat("cudaGetDeviceCount failed: ", name, " (", text, ")");
  if (err == kCudaErrorInsufficientDriver) {
    return FailedPrecondition(what, "an NVIDIA driver at least as new as the CUDA runtime",
                              "install or update the NVIDIA driver (nvidia-smi shows its "
                              "version), or run on the CPU with --device=cpu");
  }
  return Internal(what, "a working CUDA driver and device",
                  "check nvidia-smi and that the GPU is visible to this process");
}

}  // namespace weft
