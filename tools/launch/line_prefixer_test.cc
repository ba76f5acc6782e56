#include "tools/launch/line_prefixer.h"

#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace weft::launch {
namespace {

std::string Drain(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

TEST(LinePrefixerTest, PrefixesWholeLinesAcrossChunks) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    LinePrefixer p("[rank 1] ", fds[1], true);
    p.Feed("hel");
    p.Feed("lo\nwor");
    p.Feed("ld\n\nlast");
    p.Finish();
    EXPECT_EQ(p.last_lines().size(), 4u);
  }
  ::close(fds[1]);
  EXPECT_EQ(Drain(fds[0]), "[rank 1] hello\n[rank 1] world\n[rank 1] \n[rank 1] last\n");
  ::close(fds[0]);
}

TEST(LinePrefixerTest, HiddenStreamsKeepTheirTail) {
  LinePrefixer p("x ", -1, /*show=*/false, /*keep_last=*/2);
  p.Feed("a\nb\nc\n");
  EXPECT_EQ(p.last_lines(), (std::deque<std::string>{"b", "c"}));
}

}  // namespace
}  // namespace weft::launch
