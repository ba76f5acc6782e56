#include "core/kernels/moe_ops.h"

#include <array>
#include <mutex>

#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft {
namespace {

struct MoeRegistry {
  std::mutex mu;
  std::array<MoeKernelOps*, kNumDeviceTypes> ops{};  // indexed by DeviceType (meta too)
};

MoeRegistry& GetMoeRegistry() {
  static auto* r = new MoeRegistry;
  return *r;
}

}  // namespace

void RegisterMoeKernelOps(DeviceType type, MoeKernelOps* ops) {
  MoeRegistry& r = GetMoeRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  MoeKernelOps*& slot = r.ops[static_cast<int>(type)];
  WEFT_CHECK(slot == nullptr) << "two MoeKernelOps registered for one device type";
  slot = ops;
}

bool RegisterMoeKernelOpsAtStartup(DeviceType type, MoeKernelOps* ops) {
  RegisterMoeKernelOps(type, ops);
  return true;
}

absl::StatusOr<MoeKernelOps*> GetMoeKernelOps(DeviceType type) {
  MoeRegistry& r = GetMoeRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (MoeKernelOps* ops = r.ops[static_cast<int>(type)]) return ops;
  return FailedPrecondition("mixture-of-experts kernels are not linked for this device",
                            "//core/kernels/cpu (or //core/kernels/cuda) linked",
                            "depend on the device's kernel target");
}

}  // namespace weft
