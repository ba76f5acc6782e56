// Registers the CUDA kernels for DeviceType::kCUDA when //core/kernels/cuda
// is linked (alwayslink), so layers dispatch on Device without #ifdefs.
#include "core/kernels/cuda/cuda_ops.h"

namespace weft::cuda {
namespace {

const bool kRegistered = RegisterKernelOpsAtStartup(DeviceType::kCUDA, new CudaKernelOps());

}  // namespace
}  // namespace weft::cuda
