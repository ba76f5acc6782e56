#include "core/tensor/stream.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(StreamTest, CpuStreamsAndEventsAreSynchronousAndTimeHostWork) {
  auto stream = Stream::Create(Device::Cpu());
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto start = Event::Create(Device::Cpu(), /*enable_timing=*/true);
  auto end = Event::Create(Device::Cpu(), true);
  ASSERT_TRUE(start.ok() && end.ok());
  ASSERT_TRUE(start->Record(*stream).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(end->Record(*stream).ok());
  EXPECT_TRUE(*end->Query());
  EXPECT_TRUE(stream->Wait(*end).ok());
  EXPECT_TRUE(stream->Synchronize().ok());
  const float ms = *Event::ElapsedMs(*start, *end);
  EXPECT_GE(ms, 19.0f);
  EXPECT_LT(ms, 2000.0f);
}

TEST(StreamTest, MovedFromStreamIsInert) {
  Stream a = *Stream::Create(Device::Cpu());
  Stream b = std::move(a);
  EXPECT_TRUE(b.Synchronize().ok());
}

TEST(StreamTest, CudaStreamWithoutBackendIsAClearError) {
  auto s = Stream::Create(Device::Cuda(0));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("CUDA backend is not linked"), std::string::npos);
}

}  // namespace
}  // namespace weft
