#include "core/runtime/gpu_sampler.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/process_group/op_observer.h"

namespace weft {
namespace {

// The few NVML declarations used, with the ABI of nvml.h (stable since
// NVML 2): returns are nvmlReturn_t (0 = success), handles are opaque.
using NvmlDevice = void*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr unsigned int kNvmlTemperatureGpu = 0;

}  // namespace

struct GpuSampler::Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*handle_by_index)(unsigned int, NvmlDevice*) = nullptr;
  int (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  int (*power)(NvmlDevice, unsigned int*) = nullptr;  // milliwatts
  int (*temperature)(NvmlDevice, unsigned int, unsigned int*) = nullptr;
  NvmlDevice device = nullptr;

  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (lib != nullptr) dlclose(lib);
  }
};

GpuSampler::GpuSampler(Options options) : options_(std::move(options)) {}

int GpuSampler::NvmlIndex(int cuda_device, const char* visible) {
  if (visible == nullptr || *visible == '\0') return cuda_device;
  std::vector<std::string> ids = absl::StrSplit(visible, ',');
  int index = -1;
  if (cuda_device < 0 || cuda_device >= static_cast<int>(ids.size()) ||
      !absl::SimpleAtoi(ids[cuda_device], &index)) {
    return -1;
  }
  return index;
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string GpuSampler::Start() {
  auto nvml = std::make_unique<Nvml>();
  nvml->lib = dlopen(options_.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml->lib == nullptr) {
    return absl::StrCat("GPU sampling off: cannot load ", options_.library,
                        " (the NVIDIA driver's NVML); training continues without GPU samples");
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(nvml->lib, name));
    return fn != nullptr;
  };
  if (!sym(nvml->init, "nvmlInit_v2") ||
      !sym(nvml->handle_by_index, "nvmlDeviceGetHandleByIndex_v2") ||
      !sym(nvml->utilization, "nvmlDeviceGetUtilizationRates") ||
      !sym(nvml->memory, "nvmlDeviceGetMemoryInfo") ||
      !sym(nvml->power, "nvmlDeviceGetPowerUsage") ||
      !sym(nvml->temperature, "nvmlDeviceGetTemperature")) {
    return absl::StrCat("GPU sampling off: ", options_.library, " lacks the NVML functions used");
  }
  if (int rc = nvml->init(); rc != 0) {
    return absl::StrCat("GPU sampling off: nvmlInit failed (NVML error ", rc, ")");
  }
  sym(nvml->shutdown, "nvmlShutdown");
  if (int rc = nvml->handle_by_index(static_cast<unsigned int>(options_.device), &nvml->device);
      rc != 0) {
    return absl::StrCat("GPU sampling off: NVML has no GPU ", options_.device, " (error ", rc, ")");
  }
  nvml_ = std::move(nvml);
  thread_ = std::thread([this] { Loop(); });
  return "";
}

void GpuSampler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    GpuSample s;
    s.wall_us = comm::WallMicros();
    s.device = options_.device;
    // A query that fails (e.g. power on GPUs without a sensor) leaves 0.
    NvmlUtilization u{};
    if (nvml_->utilization(nvml_->device, &u) == 0) s.util_pct = u.gpu;
    NvmlMemory m{};
    if (nvml_->memory(nvml_->device, &m) == 0) {
      s.mem_used_mb = static_cast<double>(m.used) / (1 << 20);
      s.mem_total_mb = static_cast<double>(m.total) / (1 << 20);
    }
    unsigned int mw = 0;
    if (nvml_->power(nvml_->device, &mw) == 0) s.power_w = mw / 1000.0;
    unsigned int t = 0;
    if (nvml_->temperature(nvml_->device, kNvmlTemperatureGpu, &t) == 0) s.temp_c = t;
    lock.lock();
    samples_.push_back(s);
    cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.period), [this] { return stop_; });
  }
}

std::vector<GpuSample> GpuSampler::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<GpuSample> out;
  out.swap(samples_);
  return out;
}

}  // namespace weft
