#include "core/tensor/device_count_status.h"

#include <string>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(DeviceCountStatusTest, SuccessReturnsTheCount) {
  auto n = DeviceCountFromResult(kCudaSuccess, 4, "cudaSuccess", "no error");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4);
}

TEST(DeviceCountStatusTest, NoDeviceIsZeroDevices) {
  auto n = DeviceCountFromResult(kCudaErrorNoDevice, 0, "cudaErrorNoDevice",
                                 "no CUDA-capable device is detected");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
}

TEST(DeviceCountStatusTest, InsufficientDriverIsReportedNotZeroDevices) {
  auto n = DeviceCountFromResult(kCudaErrorInsufficientDriver, 0, "cudaErrorInsufficientDriver",
                                 "CUDA driver version is insufficient for CUDA runtime version");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(n.status().message());
  EXPECT_NE(msg.find("cudaErrorInsufficientDriver"), std::string::npos) << msg;
  EXPECT_NE(msg.find("driver"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("does not exist"), std::string::npos) << msg;
}

TEST(DeviceCountStatusTest, OtherErrorsAreReportedWithTheirName) {
  auto n = DeviceCountFromResult(3, 0, "cudaErrorInitializationError", "initialization error");
  ASSERT_FALSE(n.ok());
  EXPECT_NE(std::string(n.status().message()).find("cudaErrorInitializationError"),
            std::string::npos);
}

}  // namespace
}  // namespace weft
