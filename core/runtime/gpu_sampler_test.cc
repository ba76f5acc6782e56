#include "core/runtime/gpu_sampler.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(GpuSamplerTest, MissingNvmlIsOneLineAndNoSamples) {
  GpuSampler sampler({.library = "libnvidia-ml-does-not-exist.so.1"});
  const std::string note = sampler.Start();
  EXPECT_TRUE(absl::StartsWith(note, "GPU sampling off: cannot load")) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos);
  EXPECT_FALSE(sampler.running());
  EXPECT_TRUE(sampler.Drain().empty());
}

std::string FakeNvmlPath() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/" + std::getenv("TEST_WORKSPACE") +
         "/core/runtime/libfake_nvml.so";
}

TEST(GpuSamplerTest, SamplesThroughTheLoadedLibrary) {
  GpuSampler sampler({.device = 0, .period = absl::Milliseconds(10), .library = FakeNvmlPath()});
  ASSERT_EQ(sampler.Start(), "");
  ASSERT_TRUE(sampler.running());
  std::vector<GpuSample> samples;
  for (int i = 0; i < 200 && samples.size() < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    for (const GpuSample& s : sampler.Drain()) samples.push_back(s);
  }
  ASSERT_GE(samples.size(), 3u);
  EXPECT_DOUBLE_EQ(samples[0].util_pct, 87);
  EXPECT_DOUBLE_EQ(samples[0].mem_used_mb, 12 * 1024);
  EXPECT_DOUBLE_EQ(samples[0].mem_total_mb, 80 * 1024);
  EXPECT_DOUBLE_EQ(samples[0].power_w, 412.5);
  EXPECT_DOUBLE_EQ(samples[0].temp_c, 61);
  EXPECT_LT(samples[0].wall_us, samples[2].wall_us);
}

TEST(GpuSamplerTest, UnknownDeviceIsOneLine) {
  GpuSampler sampler({.device = 3, .library = FakeNvmlPath()});
  const std::string note = sampler.Start();
  EXPECT_TRUE(absl::StrContains(note, "no GPU 3")) << note;
  EXPECT_FALSE(sampler.running());
}

TEST(GpuSamplerTest, MapsCudaOrdinalsThroughCudaVisibleDevices) {
  EXPECT_EQ(GpuSampler::NvmlIndex(1, nullptr), 1);
  EXPECT_EQ(GpuSampler::NvmlIndex(1, ""), 1);
  EXPECT_EQ(GpuSampler::NvmlIndex(0, "3,1"), 3);
  EXPECT_EQ(GpuSampler::NvmlIndex(1, "3,1"), 1);
  EXPECT_EQ(GpuSampler::NvmlIndex(2, "3,1"), -1);
  EXPECT_EQ(GpuSampler::NvmlIndex(0, "GPU-8f6c2a"), -1);
}

}  // namespace
}  // namespace weft
