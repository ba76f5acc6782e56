#include "core/base/atomic_file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace weft {
namespace {

std::string Slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const std::string &name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(AtomicFileTest, CommitReplacesTheFileAndRemovesTheTemporary) {
  const std::string path = TempPath("replace.bin");
  { std::ofstream(path) << "old"; }
  auto w = *AtomicFileWriter::Open(path);
  ASSERT_TRUE(w->Write("new ").ok());
  ASSERT_TRUE(w->Write(std::string("bytes\0!", 7)).ok());
  EXPECT_EQ(Slurp(path), "old");  // untouched until Commit
  ASSERT_TRUE(w->Commit().ok());
  EXPECT_EQ(Slurp(path), std::string("new bytes\0!", 11));
  EXPECT_FALSE(std::filesystem::exists(w->temp_path()));
  EXPECT_EQ(w->Write("late").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(w->Commit().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AtomicFileTest, AbandonedWriterLeavesThePreviousFile) {
  const std::string path = TempPath("abandon.bin");
  { std::ofstream(path) << "previous"; }
  std::string tmp;
  {
    auto w = *AtomicFileWriter::Open(path);
    tmp = w->temp_path();
    ASSERT_TRUE(w->Write("half written").ok());
  }
  EXPECT_EQ(Slurp(path), "previous");
  EXPECT_FALSE(std::filesystem::exists(tmp));
}

TEST(AtomicFileTest, MissingDirectoryIsAClearError) {
  auto w = AtomicFileWriter::Open(TempPath("no/such/dir/x.bin"));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("cannot create"), std::string::npos);
  EXPECT_NE(w.status().message().find("create the output directory"), std::string::npos);
}

// --out=<an existing directory> failed after the whole write, on rename.
TEST(AtomicFileTest, ADirectoryIsRefusedBeforeAnythingIsWritten) {
  const std::string dir = TempPath("a_dir");
  std::filesystem::create_directories(dir);
  auto w = AtomicFileWriter::Open(dir);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("is a directory"), std::string::npos) << w.status();
  EXPECT_NE(w.status().message().find("name a file inside it"), std::string::npos) << w.status();
}

// A directory that exists but may not be written: not "create it first".
// /sys refuses new files even to root (EACCES), as a read-only mount would.
TEST(AtomicFileTest, AnUnwritableDirectoryIsNotCalledMissing) {
  auto w = AtomicFileWriter::Open("/sys/weft_atomic_file_test.bin");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message().find("create the output directory"), std::string::npos)
      << w.status();
  EXPECT_NE(w.status().message().find("a directory this user can write"), std::string::npos)
      << w.status();
}

}  // namespace
}  // namespace weft
