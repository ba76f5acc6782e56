#include "tools/estimate/layouts.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
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

// An MoE model with 8 experts on 4 ranks: ddp with the experts over 2 and
// over 4 ranks after zero-2, fsdp with them after fsdp; a dense model (0
// experts) and experts that do not divide get none.
TEST(LayoutsTest, ExpertParallelLayoutsForMoeModels) {
  std::vector<std::string> labels;
  for (const Layout& l : CandidateLayouts(4, 8)) labels.push_back(l.label);
  const std::vector<std::string> want = {"ddp",        "zero-1",     "zero-2",      "ep2 x ddp4",
                                         "ep4 x ddp4", "zero-3",     "fsdp",        "ep2 x fsdp4",
                                         "ep4 x fsdp4", "pp2 x fsdp2"};
  ASSERT_GE(labels.size(), want.size());
  EXPECT_EQ(std::vector<std::string>(labels.begin(), labels.begin() + want.size()), want);
  // ep2 only: ep2 x ddp4, ep2 x fsdp4, and after each split with fsdp2.
  EXPECT_EQ(CandidateLayouts(4, 6).size(), CandidateLayouts(4).size() + 5);
  for (const char* split : {"pp2", "cp2", "tp2"}) {
    const std::string base = absl::StrCat(split, " x fsdp2");
    const auto at = std::find(labels.begin(), labels.end(), base);
    ASSERT_NE(at, labels.end()) << base;
    ASSERT_NE(at + 1, labels.end()) << base;
    EXPECT_EQ(*(at + 1), absl::StrCat(split, " x ep2 x fsdp2"));
  }
  for (const Layout& l : CandidateLayouts(4, 8)) {
    if (l.ep > 1) EXPECT_EQ(DataParallelRanks(l, 4) % l.ep, 0) << l.label;  // ep is inside dp
  }
  Layout ep{"ep2 x fsdp4", "fsdp"};
  ep.ep = 2;
  EXPECT_EQ(LayoutFlags(ep, 2), "--strategy=fsdp --ep=2 --micro_batch=2");
  ParallelConfig c;
  c.set_ep(4);
  ApplyLayout({"ddp", "ddp"}, &c);
  EXPECT_EQ(c.ep(), 1);  // a layout without ep clears the job's
  ApplyLayout(ep, &c);
  EXPECT_EQ(c.ep(), 2);
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
