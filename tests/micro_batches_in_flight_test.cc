// Micro-batches in flight: with activations in per-micro-batch slots, any
// order that runs each forward before its backward computes the same
// gradients. F0 F1 F2 B2 B0 B1 gives bitwise the same per-micro-batch
// gradients as F0 B0 F1 B1 F2 B2 (dropout on, recompute on or off), a
// slot's memory is freed by its backward, and whole training runs with an
// in-flight order match gradient accumulation alone and under ddp, zero-2
// and fsdp across gloo ranks.
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/nn/materialize.h"
#include "core/nn/recompute.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt.h"
#include "tests/parity.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

using Grads = std::map<std::string, std::vector<float>>;

std::unique_ptr<Gpt> Model(bool recompute) {
  GptConfig c;
  c.set_n_layer(2);
  c.set_n_head(2);
  c.set_d_model(32);
  c.set_vocab_size(29);
  c.set_max_seq_len(16);
  c.set_dropout(0.1f);
  auto gpt = *Gpt::Create(c, 16);
  EXPECT_TRUE(MaterializeParameters(*gpt, {.seed = 5}).ok());
  if (recompute) {
    EXPECT_TRUE(EnableRecompute(*gpt->blocks(), "1").ok());
  }
  return gpt;
}

Tensor Tokens(int micro, int shift) {
  std::vector<int32_t> v(2 * 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 7 + micro * 5 + shift) % 29);
  return *Tensor::FromVector<int32_t>(v, {2, 16});
}

// Runs the actions; returns each micro-batch's own gradient (gradients
// are zeroed before every backward) and its losses.
struct Trace {
  std::vector<Grads> grads{3};
  std::vector<std::vector<float>> losses{3};
  std::vector<int64_t> slot_bytes{0, 0, 0};  // after every forward, before any backward
};

Trace Execute(Gpt& gpt, const std::string& order) {
  Trace run;
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  auto enter = [&](int m) {
    ctx.slot = m;
    ctx.dropout_seed = 1000 + m;
  };
  for (size_t i = 0; i < order.size(); i += 3) {
    const int m = order[i + 1] - '0';
    enter(m);
    if (order[i] == 'F') {
      auto losses = gpt.ForwardLoss(ctx, Tokens(m, 0), Tokens(m, 1), 1.0f / 96);
      EXPECT_TRUE(losses.ok()) << losses.status();
      run.losses[m] = testing::Values(*losses);
      run.slot_bytes[m] = ctx.store().SlotBytes(m);
    } else {
      EXPECT_GT(ctx.store().SlotBytes(m), 0) << "slot " << m << " before its backward";
      EXPECT_TRUE(ZeroGrads(gpt).ok());
      EXPECT_TRUE(gpt.BackwardFromLoss(ctx).ok());
      EXPECT_EQ(ctx.store().SlotBytes(m), 0) << "slot " << m << " after its backward";
      for (Parameter* p : gpt.Parameters()) run.grads[m][p->name()] = testing::Values(p->grad);
    }
  }
  EXPECT_EQ(ctx.store().NumEntries(), 0);
  return run;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class InFlightTest : public ::testing::TestWithParam<bool> {};

TEST_P(InFlightTest, OutOfOrderBackwardsGiveBitwiseEqualGradients) {
  const bool recompute = GetParam();
  auto a = Model(recompute), b = Model(recompute);
  const Trace seq = Execute(*a, "F0 B0 F1 B1 F2 B2 ");
  const Trace fly = Execute(*b, "F0 F1 F2 B2 B0 B1 ");
  for (int m = 0; m < 3; ++m) {
    EXPECT_TRUE(BitwiseEqual(seq.losses[m], fly.losses[m])) << "losses of micro-batch " << m;
    ASSERT_EQ(seq.grads[m].size(), fly.grads[m].size());
    for (const auto& [name, g] : seq.grads[m]) {
      EXPECT_TRUE(BitwiseEqual(g, fly.grads[m].at(name))) << name << " micro-batch " << m;
    }
  }
  // Three slots held at once; each the same size (same shapes).
  EXPECT_GT(fly.slot_bytes[0], 0);
  EXPECT_EQ(fly.slot_bytes[0], fly.slot_bytes[1]);
  EXPECT_EQ(fly.slot_bytes[1], fly.slot_bytes[2]);
  std::cout << "activation bytes per slot (GPT 2L d32, B=2, T=16"
            << (recompute ? ", block 1 recomputed" : "") << "): " << fly.slot_bytes[0] << "\n";
}

TEST(InFlightTest, RecomputeKeepsLessPerSlot) {
  const Trace plain = Execute(*Model(false), "F0 F1 F2 B2 B0 B1 ");
  const Trace recomputed = Execute(*Model(true), "F0 F1 F2 B2 B0 B1 ");
  EXPECT_LT(recomputed.slot_bytes[0], plain.slot_bytes[0]);
}

INSTANTIATE_TEST_SUITE_P(Recompute, InFlightTest, ::testing::Bool());

GptJob Job() {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  job.mutable_train()->set_steps(8);
  return job;
}

TEST(InFlightTrainingTest, FixedOrderMatchesGradientAccumulation) {
  GptJob job = Job();
  job.mutable_train()->set_micro_batch(2);  // 4 accumulation steps
  auto reference = testing::RunSingleProcess(job);
  ASSERT_TRUE(reference.ok()) << reference.status();
  job.mutable_train()->set_step_schedule("F0 F1 F2 F3 B3 B1 B2 B0");
  auto in_flight = testing::RunSingleProcess(job);
  ASSERT_TRUE(in_flight.ok()) << in_flight.status();
  // The first step's forwards see the same parameters: bitwise equal loss.
  EXPECT_EQ(reference->losses[0], in_flight->losses[0]);
  // Gradients accumulate in another order: f32 summation order only.
  testing::ExpectParity(*reference, *in_flight, 1e-5, 1e-4, "in-flight order, one process");
}

TEST(InFlightTrainingTest, ParticipantsFollowTheScheduleAcrossRanks) {
  GptJob job = Job();
  auto reference = testing::RunSingleProcess(job);
  ASSERT_TRUE(reference.ok()) << reference.status();
  job.mutable_train()->set_micro_batch(2);  // 2 ranks x 2 accumulation steps
  job.mutable_train()->set_step_schedule("F0 F1 B1 B0");
  for (const char* strategy : {"ddp", "zero", "fsdp"}) {
    ParallelConfig* p = job.mutable_train()->mutable_parallel();
    p->set_strategy(strategy);
    p->set_zero_stage(2);
    p->set_bucket_mb(0.02);
    auto multi = testing::RunMultiProcess(job, 2);
    ASSERT_TRUE(multi.ok()) << strategy << ": " << multi.status();
    testing::ExpectParity(*reference, *multi, 1e-4, 1e-3, std::string(strategy) + " in flight");
  }
}

TEST(InFlightTrainingTest, ScheduleThatDoesNotFitTheStepIsAnError) {
  GptJob job = Job();
  job.mutable_train()->set_micro_batch(2);  // 4 accumulation steps
  job.mutable_train()->set_step_schedule("F0 F1 B1 B0");
  auto trainer = testing::MakeGptTrainer(job);
  ASSERT_FALSE(trainer.ok());
  EXPECT_NE(trainer.status().message().find("exactly 4 accumulation steps"), std::string::npos)
      << trainer.status();
}

}  // namespace
}  // namespace weft
