#include "core/runtime/config_loader.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/runtime/config_loader_test.pb.h"
#include "core/runtime/train_config.pb.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

std::string WriteTemp(const std::string& text) {
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/cfg.textproto";
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigLoaderTest, FileThenFlagsOverride) {
  const std::string path = WriteTemp("steps: 10\noptim { lr: 0.5 }\n");
  TrainConfig c;
  ASSERT_TRUE(LoadConfigFromArgs({"--steps=20", "--config=" + path, "--optim.warmup_steps=3"}, &c)
                  .ok());
  EXPECT_EQ(c.steps(), 20);  // flags win regardless of order
  EXPECT_FLOAT_EQ(c.optim().lr(), 0.5f);
  EXPECT_EQ(c.optim().warmup_steps(), 3);
  EXPECT_EQ(c.global_batch(), 8);  // default kept
}

TEST(ConfigLoaderTest, LeafNamesAndBooleans) {
  TrainConfig c;
  ASSERT_TRUE(LoadConfigFromArgs({"--lr=0.01", "--zero_stage=2", "--recompute", "--noshuffle",
                                  "--device=cuda:1", "--strategy=ddp,fsdp"},
                                 &c)
                  .ok());
  EXPECT_FLOAT_EQ(c.optim().lr(), 0.01f);
  EXPECT_EQ(c.parallel().zero_stage(), 2);
  EXPECT_TRUE(c.recompute());
  EXPECT_FALSE(c.data().shuffle());
  EXPECT_EQ(c.device(), "cuda:1");
  EXPECT_EQ(c.parallel().strategy(), "ddp,fsdp");
}

// Any tail of a field's dotted path at a dot names it when no other path
// ends the same way (the README's --optim.lr under a job's train.optim.lr
// was an unknown flag: only the leaf or the whole path worked).
TEST(ConfigLoaderTest, DottedTailsOfAPath) {
  testing::LoaderTestJob job;
  ASSERT_TRUE(LoadConfigFromArgs({"--optim.lr=0.5", "--train.inner.depth=3"}, &job).ok());
  EXPECT_FLOAT_EQ(job.train().optim().lr(), 0.5f);
  EXPECT_EQ(job.train().inner().depth(), 3);
  ASSERT_TRUE(LoadConfigFromArgs({"--lr=0.25", "--count=2"}, &job).ok());
  EXPECT_FLOAT_EQ(job.train().optim().lr(), 0.25f);
  EXPECT_EQ(job.eval().count(), 2);
  // inner.depth lies under train and eval: ambiguous, with both named.
  absl::Status s = LoadConfigFromArgs({"--inner.depth=4"}, &job);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ambiguous"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--eval.inner.depth"), std::string::npos) << s;
  EXPECT_TRUE(LoadConfigFromArgs({"--eval.inner.depth=4"}, &job).ok());
  EXPECT_EQ(job.eval().inner().depth(), 4);
  // A tail starts at a dot: "ptim.lr" is no field.
  EXPECT_FALSE(LoadConfigFromArgs({"--ptim.lr=1"}, &job).ok());
}

TEST(ConfigLoaderTest, UnknownFlagSuggestsCandidates) {
  TrainConfig c;
  absl::Status s = LoadConfigFromArgs({"--warmup=5"}, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown flag --warmup"), std::string::npos);
  EXPECT_NE(s.message().find("--optim.warmup_steps"), std::string::npos);
}

TEST(ConfigLoaderTest, BadValuesAndFilesAreErrors) {
  TrainConfig c;
  // The error is ours alone: protobuf's raw "[libprotobuf ERROR ...]" line
  // used to reach stderr ahead of it.
  ::testing::internal::CaptureStderr();
  absl::Status bad = LoadConfigFromArgs({"--lr=abc"}, &c);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(bad.message().find("--optim.lr=abc is not a valid float"), std::string::npos) << bad;
  EXPECT_FALSE(LoadConfigFromArgs({"--steps=many"}, &c).ok());
  EXPECT_FALSE(LoadConfigFromArgs({"--steps"}, &c).ok());
  EXPECT_EQ(LoadConfigFromArgs({"--config=/nonexistent.textproto"}, &c).code(),
            absl::StatusCode::kNotFound);
  const std::string path = WriteTemp("steps: ten\n");
  absl::Status s = LoadConfigFromArgs({"--config=" + path}, &c);
  EXPECT_NE(s.message().find("line 1"), std::string::npos);
  // One separator between the parser's text and "expected ...", not "; ;".
  EXPECT_EQ(s.message().find("; ;"), std::string::npos) << s;
  EXPECT_FALSE(LoadConfigFromArgs({"positional"}, &c).ok());
}

// Each of these ran with the defaults (a directory) or never returned
// (/dev/zero, a FIFO nobody writes), or put raw bytes on the terminal.
TEST(ConfigLoaderTest, NonTextConfigsAreRefusedAtOnce) {
  TrainConfig c;
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/a_dir";
  std::filesystem::create_directories(dir);
  absl::Status s = LoadConfigFromArgs({"--config=" + dir}, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is a directory"), std::string::npos) << s;
  s = LoadConfigFromArgs({"--config=/dev/zero"}, &c);
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s;
  const std::string fifo = std::string(std::getenv("TEST_TMPDIR")) + "/a_fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  s = LoadConfigFromArgs({"--config=" + fifo}, &c);
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s;
  const std::string binary = WriteTemp(std::string("steps: 3\n\x01\x00\xff\xfe", 13));
  s = LoadConfigFromArgs({"--config=" + binary}, &c);
  EXPECT_NE(s.message().find("holds byte 0x01 at offset 9"), std::string::npos) << s;
  // A parse error quoting odd bytes escapes them.
  const std::string odd = WriteTemp("steps: \xff\xfe\n");
  s = LoadConfigFromArgs({"--config=" + odd}, &c);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(std::string(s.message()).find('\xff'), std::string::npos) << s;
}

TEST(ConfigLoaderTest, PassthroughFlagsAreReturned) {
  TrainConfig c;
  std::vector<std::string> skipped;
  ASSERT_TRUE(LoadConfigFromArgs({"--help", "--steps=3"}, &c, {"help"}, &skipped).ok());
  EXPECT_EQ(skipped, std::vector<std::string>{"--help"});
}

TEST(ConfigLoaderTest, DescribeListsEveryLeaf) {
  TrainConfig c;
  const std::string d = DescribeConfig(c);
  EXPECT_NE(d.find("--optim.lr = 0.0006"), std::string::npos);
  EXPECT_NE(d.find("--parallel.zero_stage = 1"), std::string::npos);
}

}  // namespace
}  // namespace weft
