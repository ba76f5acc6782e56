#include "models/gpt/moe_resume_note.h"

#include "gtest/gtest.h"

namespace weft {
namespace {

GptJob Job(int micro_batch, int groups, bool moe = true) {
  GptJob job;
  job.mutable_train()->set_micro_batch(micro_batch);
  job.mutable_model()->set_moe_every(moe ? 2 : 0);
  job.mutable_model()->set_moe_routing_groups(groups);
  return job;
}

// ep2 x fsdp2 (4 data-parallel ranks, micro-batch 2) resumed in one process
// at micro-batch 8: the same samples a forward, 1 group instead of 4 (a real
// resume drifted by 3e-4 by step 12 and matched with --moe_routing_groups=4).
TEST(MoeResumeNoteTest, FewerRanksNameTheGroupsThatKeepTheMath) {
  const std::string note = MoeRoutingResumeNote(Job(2, 1), 4, Job(8, 1), 1);
  EXPECT_NE(note.find("8 samples a forward in 4 groups"), std::string::npos) << note;
  EXPECT_NE(note.find("--moe_routing_groups=4 keeps the groups"), std::string::npos) << note;
  EXPECT_EQ(note.find("--micro_batch"), std::string::npos) << note;
  // With that flag the groups are the checkpoint's: no note.
  EXPECT_EQ(MoeRoutingResumeNote(Job(2, 1), 4, Job(8, 4), 1), "");
}

TEST(MoeResumeNoteTest, AnotherMicroBatchIsNamed) {
  const std::string note = MoeRoutingResumeNote(Job(4, 1), 2, Job(4, 1), 1);
  EXPECT_NE(note.find("--micro_batch=8 keeps the samples"), std::string::npos) << note;
  EXPECT_NE(note.find("--moe_routing_groups=2 keeps the groups"), std::string::npos) << note;
}

TEST(MoeResumeNoteTest, DenseModelsAndTheSameLayoutSayNothing) {
  EXPECT_EQ(MoeRoutingResumeNote(Job(2, 1, false), 4, Job(8, 1, false), 1), "");
  EXPECT_EQ(MoeRoutingResumeNote(Job(2, 1), 4, Job(2, 1), 4), "");
}

}  // namespace
}  // namespace weft
