#include "checkpoint/dir_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace weft::ckpt {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(DirLockTest, ASecondJobIsRefusedNamingTheFirstUntilItEnds) {
  const std::string dir = FreshDir("runs/run1");  // created with its parents
  auto first = DirLock::Acquire(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->note(), "");

  // Another process, as a second job is.
  const pid_t child = ::fork();
  if (child == 0) {
    auto second = DirLock::Acquire(dir);
    const bool named = !second.ok() &&
                       second.status().message().find(absl::StrCat(
                           "is in use by another job (pid ", ::getppid(), " on host ")) !=
                           std::string::npos;
    ::_exit(named ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the second job was not refused with the first one's pid";

  first->reset();  // the job ends
  auto after = DirLock::Acquire(dir);
  ASSERT_TRUE(after.ok()) << after.status();
}

}  // namespace
}  // namespace weft::ckpt
