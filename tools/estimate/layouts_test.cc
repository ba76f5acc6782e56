#include "tools/estimate/layouts.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace weft {
namespace {

std::vector<std::string> Labels(int nproc) {
  std::vector<std::string> out;
  for (const Layout& l : CandidateLayouts(nproc)) out.push_back(l.label);
  return out;
}

TEST(LayoutsTest, OneProcessIsJustThat) { EXPECT_EQ(Labels(1), std::vector<std::string>{"none"}); }

TEST(LayoutsTest, FourRanks) {
  EXPECT_EQ(Labels(4), (std::vector<std::string>{
                           "ddp", "zero-1", "zero-2", "zero-3", "fsdp", "pp2 x fsdp2", "pp4",
                           "cp2 x fsdp2", "cp2 x pp2", "cp4", "tp2 x fsdp2", "tp2 x pp2",
                           "tp2 x cp2", "tp4"}));
}

TEST(LayoutsTest, EveryLayoutUsesEveryRank) {
  for (int n : {2, 6, 8, 12}) {
    std::set<std::string> seen;
    for (const Layout& l : CandidateLayouts(n)) {
      EXPECT_TRUE(seen.insert(l.label).second) << l.label;
      const int model = l.pp * l.cp * l.tp;
      EXPECT_EQ(n % model, 0) << l.label;
      const bool fsdp = l.strategy.find("fsdp") != std::string::npos;
      if (model > 1) {
        EXPECT_EQ(fsdp, n / model > 1) << l.label;
      }
      EXPECT_EQ(l.strategy.find("tp") != std::string::npos, l.tp > 1) << l.label;
    }
  }
}

TEST(LayoutsTest, ApplySetsTheMeshAndLeavesTheRest) {
  ParallelConfig c;
  c.set_pp_schedule("gpipe");
  c.set_dp_shard(4);
  ApplyLayout({"tp2 x pp2", "tp", 0, 2, 1, 2}, &c);
  EXPECT_EQ(c.strategy(), "tp");
  EXPECT_EQ(c.pp(), 2);
  EXPECT_EQ(c.tp(), 2);
  EXPECT_EQ(c.cp(), 1);
  EXPECT_FALSE(c.has_dp_shard());
  EXPECT_EQ(c.pp_schedule(), "gpipe");
}

TEST(LayoutsTest, FitMicroBatchKeepsTheGlobalBatch) {
  EXPECT_EQ(FitMicroBatch(16, 16, 1, 1), 16);
  EXPECT_EQ(FitMicroBatch(16, 16, 4, 1), 4);   // 4 ranks x 4
  EXPECT_EQ(FitMicroBatch(16, 3, 4, 1), 2);    // at most the job's 3: 2 divides
  EXPECT_EQ(FitMicroBatch(16, 16, 2, 4), 2);   // a pipeline of 4 needs 4 per rank
  EXPECT_EQ(FitMicroBatch(12, 8, 8, 1), 0);    // 8 ranks cannot share 12 samples
  EXPECT_EQ(FitMicroBatch(4, 4, 1, 8), 0);     // nor 8 stages 4 samples
}

TEST(LayoutsTest, FlagsSelectTheLayout) {
  EXPECT_EQ(LayoutFlags({"zero-2", "zero", 2}, 8), "--strategy=zero --zero_stage=2 --micro_batch=8");
  EXPECT_EQ(LayoutFlags({"tp2 x pp2 x fsdp2", "tp,fsdp", 0, 2, 1, 2}, 4),
            "--strategy=tp,fsdp --pp=2 --tp=2 --micro_batch=4");
  EXPECT_EQ(LayoutFlags({"cp4", "", 0, 1, 4, 1}, 1), "--cp=4 --micro_batch=1");
}

}  // namespace
}  // namespace weft
