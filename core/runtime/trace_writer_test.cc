#include "core/runtime/trace_writer.h"

#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/base/json.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

std::string Dir() { return std::getenv("TEST_TMPDIR"); }

absl::StatusOr<JsonValue> Load(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseJson(text.str());
}

TEST(TraceWriterTest, WritesNamedTracksAndEscapedCompleteEvents) {
  TraceWriter w(3);
  w.NameTrack(TraceWriter::kStepTrack, "step phases");
  w.Add(TraceWriter::kStepTrack, "odd \"name\"\n", "phase", 1000, 250, "\"bytes\":8");
  w.Add(TraceWriter::kFirstCommTrack, "all_reduce", "comm", 1100, -5);  // clamped to 0
  EXPECT_EQ(w.num_events(), 2u);
  const std::string path = RankTracePath(Dir(), 3);
  ASSERT_TRUE(w.Write(path).ok());
  absl::StatusOr<JsonValue> t = Load(path);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<JsonValue>& events = t->Find("traceEvents")->array;
  ASSERT_EQ(events.size(), 5u);  // process name, sort index, one track name, two spans
  EXPECT_EQ(events[0].Find("args")->Find("name")->string, "rank 3");
  EXPECT_EQ(events[2].Find("args")->Find("name")->string, "step phases");
  EXPECT_EQ(events[3].Find("name")->string, "odd \"name\"\n");
  EXPECT_EQ(events[3].Find("args")->Find("bytes")->number, 8);
  EXPECT_EQ(events[4].Find("dur")->number, 0);
  for (const JsonValue& e : events) EXPECT_EQ(e.Find("pid")->number, 3);
}

TEST(TraceWriterTest, MergeKeepsEveryRankAsItsOwnProcess) {
  const std::string dir = Dir() + "/m";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  std::vector<std::string> paths;
  for (int rank = 0; rank < 3; ++rank) paths.push_back(RankTracePath(dir, rank));
  for (int rank = 0; rank < 3; ++rank) {
    TraceWriter w(rank);
    w.Add(TraceWriter::kStepTrack, "forward", "phase", 10 * rank, 5);
    ASSERT_TRUE(w.Write(paths[rank]).ok());
  }
  const std::string merged = MergedTracePath(dir);
  ASSERT_TRUE(MergeTraceFiles(paths, merged).ok());
  absl::StatusOr<JsonValue> t = Load(merged);
  ASSERT_TRUE(t.ok()) << t.status();
  std::set<int> processes, spans;
  for (const JsonValue& e : t->Find("traceEvents")->array) {
    const int pid = static_cast<int>(e.Find("pid")->number);
    if (e.Find("name")->string == "process_name") processes.insert(pid);
    if (e.Find("ph")->string == "X") spans.insert(pid);
  }
  EXPECT_EQ(processes, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(spans, (std::set<int>{0, 1, 2}));
  EXPECT_FALSE(MergeTraceFiles({dir + "/missing.json"}, merged).ok());
}

TEST(TraceWriterTest, UnwritableDirectoryIsAnErrorWithAHint) {
  absl::Status s = TraceWriter(0).Write("/nonexistent/dir/trace.json");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("--trace_dir"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
