// The MoE kernel registry covers every device type: the meta device (dry
// runs) has no MoE kernels and gets a clear error. The table used to hold
// two slots (cpu, cuda), so a lookup for meta read past its end.
#include "core/kernels/moe_ops.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(MoeKernelOpsRegistryTest, EveryDeviceTypeHasASlot) {
  for (DeviceType type : {DeviceType::kCPU, DeviceType::kCUDA, DeviceType::kMeta}) {
    absl::StatusOr<MoeKernelOps*> ops = GetMoeKernelOps(type);  // none linked here
    ASSERT_FALSE(ops.ok());
    EXPECT_EQ(ops.status().code(), absl::StatusCode::kFailedPrecondition) << ops.status();
    EXPECT_NE(ops.status().message().find("not linked"), std::string::npos) << ops.status();
  }
}

}  // namespace
}  // namespace weft
