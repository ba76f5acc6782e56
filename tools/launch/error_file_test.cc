#include "tools/launch/error_file.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/json.h"
#include "gtest/gtest.h"

namespace weft::launch {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// weft's launcher reads its own file back; torchrun reads its JSON
// (torch.distributed.elastic's ProcessFailure: "message" and "timestamp").
TEST(ErrorFileTest, BothFilesHoldTheMessageAndTheTime) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string weft_file = dir + "/rank_1", torch_file = dir + "/error.json";
  ::setenv(kErrorFileEnv, weft_file.c_str(), 1);
  ::setenv(kTorchrunErrorFileEnv, torch_file.c_str(), 1);
  const std::string message = "error: rank 1 \"lost\" its peer\n\tat step 3";
  const int64_t before = absl::ToUnixNanos(absl::Now());
  RecordFailure(message);

  std::optional<RecordedFailure> f = ReadFailure(weft_file);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->message, message);
  EXPECT_GE(f->unix_ns, before);
  EXPECT_LE(f->unix_ns, absl::ToUnixNanos(absl::Now()));

  absl::StatusOr<JsonValue> json = ParseJson(Read(torch_file));
  ASSERT_TRUE(json.ok()) << json.status() << ": " << Read(torch_file);
  const JsonValue* text = json->Find("message");
  const JsonValue* timestamp = json->Find("timestamp");
  ASSERT_NE(text, nullptr);
  ASSERT_NE(timestamp, nullptr);
  EXPECT_EQ(text->string, message);
  EXPECT_NEAR(timestamp->number, before / 1e9, 2.0);

  EXPECT_FALSE(ReadFailure(dir + "/nothing_here").has_value());
}

}  // namespace
}  // namespace weft::launch
