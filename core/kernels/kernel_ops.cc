#include "core/kernels/kernel_ops.h"

#include <array>
#include <mutex>

#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft {
namespace {

struct Registry {
  std::mutex mu;
  std::array<KernelOps*, 2> ops{};  // indexed by DeviceType
};

Registry& GetRegistry() {
  static auto* r = new Registry;
  return *r;
}

}  // namespace

void RegisterKernelOps(DeviceType type, KernelOps* ops) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  KernelOps*& slot = r.ops[static_cast<int>(type)];
  WEFT_CHECK(slot == nullptr) << "two KernelOps registered for one device type";
  slot = ops;
}

bool RegisterKernelOpsAtStartup(DeviceType type, KernelOps* ops) {
  RegisterKernelOps(type, ops);
  return true;
}

absl::StatusOr<KernelOps*> GetKernelOps(DeviceType type) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (KernelOps* ops = r.ops[static_cast<int>(type)]) return ops;
  if (type == DeviceType::kCUDA) {
    return FailedPrecondition("CUDA kernels are not linked into this binary",
                              "a binary built with the CUDA toolkit that depends on "
                              "//core/kernels/cuda",
                              "install the CUDA toolkit and rebuild, or use --device=cpu");
  }
  return Internal("CPU kernels are not registered", "//core/kernels/cpu linked (alwayslink)");
}

}  // namespace weft
