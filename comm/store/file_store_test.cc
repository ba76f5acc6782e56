#include "comm/store/file_store.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

std::string TempPath(absl::string_view name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, "_", ::getpid());
}

TEST(FileStoreTest, TwoInstancesShareOneFile) {
  const std::string path = TempPath("shared");
  auto a = FileStore::Create(path, absl::Seconds(2));
  auto b = FileStore::Create(path, absl::Seconds(2));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Set("k", "from_a").ok());
  EXPECT_EQ(*(*b)->Get("k"), "from_a");
  EXPECT_EQ(*(*b)->Add("n", 2), 2);
  EXPECT_EQ(*(*a)->Add("n", 2), 4);
  EXPECT_TRUE(*(*a)->DeleteKey("k"));
  EXPECT_FALSE(*(*b)->Check({"k"}));
}

// Processes (not threads) contend on the flock: every Add must count.
TEST(FileStoreTest, ProcessesAddAtomically) {
  const std::string path = TempPath("procs");
  constexpr int kProcs = 4;
  constexpr int kAdds = 100;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = FileStore::Create(path, absl::Seconds(10));
      if (!store.ok()) ::_exit(2);
      for (int i = 0; i < kAdds; ++i) {
        if (!(*store)->Add("count", 1).ok()) ::_exit(3);
      }
      if (!(*store)->Set(absl::StrCat("done_", p), "1").ok()) ::_exit(4);
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  auto store = FileStore::Create(path, absl::Seconds(2));
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->Wait({"done_0", "done_1", "done_2", "done_3"}).ok());
  EXPECT_EQ(*(*store)->Get("count"), absl::StrCat(kProcs * kAdds));
}

TEST(FileStoreTest, UnwritablePathIsInvalidArgument) {
  auto store = FileStore::Create("/nonexistent_dir_for_weft/store");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument) << store.status();
}

}  // namespace
}  // namespace weft::comm
