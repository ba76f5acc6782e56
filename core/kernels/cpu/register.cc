// Registers the production CPU kernels (FastCpuKernelOps) for DeviceType::kCPU when this target is linked.
#include "core/kernels/cpu/fast_ops.h"

namespace weft::cpu {
namespace {

const bool kRegistered = RegisterKernelOpsAtStartup(DeviceType::kCPU, new FastCpuKernelOps());

}  // namespace
}  // namespace weft::cpu
