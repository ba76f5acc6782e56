#include "core/tensor/device_backend.h"

#include <array>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/base/errors.h"

namespace weft {
namespace {

struct Registry {
  std::mutex mu;
  std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes> backends;  // indexed by DeviceType
};

Registry& GetRegistry() {
  static auto* registry = new Registry;
  return *registry;
}

absl::Status NoGraphs(const DeviceBackend& backend) {
  return FailedPrecondition(absl::StrCat("graph capture on ", Device{backend.type(), 0}.ToString()),
                            "a CUDA device", "CUDA graphs replay GPU work; drop --cuda_graph");
}

}  // namespace

absl::Status DeviceBackend::BeginCapture(int, NativeStream) { return NoGraphs(*this); }
absl::StatusOr<NativeGraph> DeviceBackend::EndCapture(int, NativeStream) {
  return NoGraphs(*this);
}
absl::Status DeviceBackend::LaunchGraph(int, NativeGraph, NativeStream) { return NoGraphs(*this); }
absl::StatusOr<std::unique_ptr<Allocator>> DeviceBackend::CreateGraphAllocator(int, std::string) {
  return NoGraphs(*this);
}

void RegisterDeviceBackend(std::unique_ptr<DeviceBackend> backend) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& slot = r.backends[static_cast<int>(backend->type())];
  WEFT_CHECK(slot == nullptr) << "two device backends registered for one device type";
  slot = std::move(backend);
}

bool RegisterDeviceBackendAtStartup(std::unique_ptr<DeviceBackend> backend) {
  RegisterDeviceBackend(std::move(backend));
  return true;
}

absl::StatusOr<DeviceBackend*> GetDeviceBackend(DeviceType type) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  DeviceBackend* backend = r.backends[static_cast<int>(type)].get();
  if (backend != nullptr) return backend;
  if (type == DeviceType::kCUDA) {
    return FailedPrecondition(
        "the CUDA backend is not linked into this binary",
        "a binary built with the CUDA toolkit that depends on //core/tensor/cuda:backend",
        "install the CUDA toolkit at /usr/local/cuda (or set CUDA_PATH) and rebuild, or run "
        "with --device=cpu");
  }
  return Internal(absl::StrCat("the ", Device{type, 0}.ToString(), " device backend is not registered"),
                  "//core/tensor linked (its cpu and meta backends are alwayslink)");
}

}  // namespace weft
