// Registers the CPU kernels for DeviceType::kCPU when this target is linked.
#include "core/kernels/cpu/cpu_ops.h"

namespace weft::cpu {
namespace {

const bool kRegistered = RegisterKernelOpsAtStartup(DeviceType::kCPU, new CpuKernelOps());

}  // namespace
}  // namespace weft::cpu
