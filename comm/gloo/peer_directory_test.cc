// The directory names exited peers on this host: one alone is the peer an
// unattributed socket error met; several (a launcher killed with its
// workers) are listed, not guessed between.
#include "comm/gloo/peer_directory.h"

#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/store/hash_store.h"
#include "gtest/gtest.h"

namespace weft::comm::gloo_internal {
namespace {

// The pid of a child process that has exited and been reaped.
int ExitedPid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

std::string ThisHost() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

TEST(PeerDirectoryTest, ExitedPeersOnThisHostAreNamed) {
  HashStore store;
  ASSERT_TRUE(PeerDirectory::Publish(store, 0).ok());
  ASSERT_TRUE(store.Set("process/1", absl::StrCat(ThisHost(), " ", ::getpid())).ok());  // alive
  ASSERT_TRUE(store.Set("process/2", absl::StrCat(ThisHost(), " ", ExitedPid())).ok());
  PeerDirectory one = PeerDirectory::Collect(store, 0, 3);
  EXPECT_EQ(one.ExitedPeers(), std::vector<int>{2});
  EXPECT_EQ(one.FindPeer("Connection reset by peer [127.0.0.1]:1"), 2);

  ASSERT_TRUE(store.Set("process/1", absl::StrCat(ThisHost(), " ", ExitedPid())).ok());
  PeerDirectory two = PeerDirectory::Collect(store, 0, 3);
  EXPECT_EQ(two.ExitedPeers(), (std::vector<int>{1, 2}));
  EXPECT_EQ(two.FindPeer("Connection reset by peer [127.0.0.1]:1"), -1) << "no guessing";
}

}  // namespace
}  // namespace weft::comm::gloo_internal
