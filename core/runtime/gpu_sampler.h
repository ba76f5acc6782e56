// GpuSampler: GPU utilisation, memory used, power and temperature every
// period, read through NVML, the way llview shows a job's GPUs.
//
// NVML is the driver's libnvidia-ml.so.1, opened with dlopen when the
// sampler starts, so building weft needs no NVML and a machine without the
// driver simply gets no samples: Start then returns a one-line note (never
// an error) that the caller prints once.
#ifndef WEFT_CORE_RUNTIME_GPU_SAMPLER_H_
#define WEFT_CORE_RUNTIME_GPU_SAMPLER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace weft {

struct GpuSample {
  int64_t wall_us = 0;
  int device = 0;
  double util_pct = 0;  // SM busy over the driver's last sample window
  double mem_used_mb = 0;
  double mem_total_mb = 0;
  double power_w = 0;
  double temp_c = 0;
};

class GpuSampler {
 public:
  struct Options {
    int device = 0;  // CUDA ordinal of this rank's GPU (see NvmlIndex)
    absl::Duration period = absl::Seconds(1);
    // The library to open; tests point it at a fake or a missing file.
    std::string library = "libnvidia-ml.so.1";
  };

  explicit GpuSampler(Options options);

  // NVML numbers every GPU of the machine, CUDA only the visible ones: the
  // NVML index of CUDA ordinal `cuda_device` under CUDA_VISIBLE_DEVICES
  // `visible` (null or empty: all visible, the same numbers). -1 when the
  // list names GPUs by UUID or is too short.
  static int NvmlIndex(int cuda_device, const char* visible);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Opens NVML and starts the sampling thread. Returns "" when sampling, or
  // the one line saying why not ("GPU sampling off: ...").
  std::string Start();
  // Samples taken since the last call, oldest first.
  std::vector<GpuSample> Drain();
  bool running() const { return thread_.joinable(); }

 private:
  struct Nvml;  // the dlopen'ed functions
  void Loop();

  const Options options_;
  std::unique_ptr<Nvml> nvml_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<GpuSample> samples_;
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_GPU_SAMPLER_H_
