// DeviceGuard: makes a GPU current for a scope and restores the previous one,
// so library calls never leave the caller on a different device.
#ifndef WEFT_CORE_TENSOR_CUDA_DEVICE_GUARD_H_
#define WEFT_CORE_TENSOR_CUDA_DEVICE_GUARD_H_

#include <cuda_runtime_api.h>

namespace weft::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != index) (void)cudaSetDevice(index);
  }
  ~DeviceGuard() {
    int current = -1;
    if (previous_ >= 0 && cudaGetDevice(&current) == cudaSuccess && current != previous_) {
      (void)cudaSetDevice(previous_);
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace weft::cuda

#endif  // WEFT_CORE_TENSOR_CUDA_DEVICE_GUARD_H_
