// The stage view of the GPT: running the stages one at a time, boundary
// tensors passed by hand (as a pipeline does between ranks), gives exactly
// the whole model's loss and gradients, with or without recompute, and the
// tied embedding is visible as a parameter shared by the first and last
// stages.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/nn/materialize.h"
#include "core/nn/recompute.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt.h"
#include "core/nn/loss.h"

namespace weft {
namespace {

using ::weft::testing::Values;

GptConfig Tiny(bool tied = true) {
  GptConfig c;
  c.set_n_layer(3);
  c.set_n_head(2);
  c.set_d_model(16);
  c.set_vocab_size(13);
  c.set_vocab_pad_multiple(8);
  c.set_max_seq_len(8);
  c.set_dropout(0.1f);  // masks must agree between the two ways of running
  c.set_tie_weights(tied);
  return c;
}

struct Result {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> grads;
};

std::unique_ptr<Gpt> Model(bool tied = true) {
  auto gpt = *Gpt::Create(Tiny(tied), 8);
  EXPECT_TRUE(MaterializeParameters(*gpt, {.seed = 11}).ok());
  EXPECT_TRUE(ZeroGrads(*gpt).ok());
  return gpt;
}

Result Collect(Gpt& gpt, const Tensor& losses) {
  Result r;
  r.losses = Values(losses);
  for (Parameter* p : gpt.Parameters()) r.grads[p->name()] = Values(p->grad);
  return r;
}

RunContext Ctx() {
  RunContext ctx = *RunContext::Create(Device::Cpu(), DType::kF32);
  ctx.dropout_seed = 77;
  return ctx;
}

const Tensor& Inputs() {
  static const Tensor x = *Tensor::FromVector<int32_t>(
      {1, 4, 9, 2, 3, 3, 0, 10, 12, 5, 6, 7, 8, 1, 2, 11}, {2, 8});
  return x;
}
const Tensor& Targets() {
  static const Tensor y = *Tensor::FromVector<int32_t>(
      {4, 9, 2, 3, 3, 0, 10, 12, 5, 6, 7, 8, 1, 2, 11, 0}, {2, 8});
  return y;
}

Result Whole(Gpt& gpt) {
  RunContext ctx = Ctx();
  Tensor losses = *gpt.ForwardLoss(ctx, Inputs(), Targets(), 1.0f / 16);
  EXPECT_TRUE(gpt.BackwardFromLoss(ctx).ok());
  EXPECT_EQ(ctx.store().NumEntries(), 0) << "backward leaves nothing saved";
  return Collect(gpt, losses);
}

// Every stage on its own, each boundary tensor copied as if received.
Result StageByStage(Gpt& gpt) {
  RunContext ctx = Ctx();
  std::vector<Stage> stages = gpt.Stages();
  Tensor h = Inputs();
  const LossInputs loss{&Targets(), 1.0f / 16};
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    Tensor out = *ForwardStages(ctx, stages, s, s + 1, h, loss);
    h = s + 1 < static_cast<int>(stages.size()) ? *out.Clone() : out;
  }
  Tensor losses = h;
  Tensor g;
  for (int s = static_cast<int>(stages.size()) - 1; s >= 0; --s) {
    absl::StatusOr<Tensor> dx = BackwardStages(ctx, stages, s, s + 1, g);
    EXPECT_TRUE(dx.ok()) << dx.status();
    g = dx->defined() ? *dx->Clone() : Tensor();
  }
  EXPECT_EQ(ctx.store().NumEntries(), 0);
  return Collect(gpt, losses);
}

void ExpectBitwiseEqual(const Result& a, const Result& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  EXPECT_EQ(0, std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(float)));
  for (const auto& [name, g] : a.grads) {
    const std::vector<float>& h = b.grads.at(name);
    ASSERT_EQ(g.size(), h.size()) << name;
    EXPECT_EQ(0, std::memcmp(g.data(), h.data(), g.size() * sizeof(float))) << name;
  }
}

TEST(GptStagesTest, StagesAreEmbedBlocksHead) {
  auto gpt = Model();
  std::vector<Stage> stages = gpt->Stages();
  std::vector<std::string> names;
  for (const Stage& s : stages) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed", "blocks.0", "blocks.1", "blocks.2", "head"}));
  EXPECT_EQ(stages.back().loss->type_name(), "CrossEntropyLoss");
  for (size_t i = 0; i + 1 < stages.size(); ++i) EXPECT_EQ(stages[i].loss, nullptr);
}

TEST(GptStagesTest, StageByStageEqualsWholeModel) {
  auto a = Model(), b = Model();
  ExpectBitwiseEqual(Whole(*a), StageByStage(*b));
}

TEST(GptStagesTest, RecomputedStageRangeEqualsWholeModel) {
  auto a = Model(), b = Model();
  // Blocks 0 and 1 recompute their activations in backward.
  ASSERT_TRUE(EnableRecompute(*b->blocks(), "0").ok());
  ASSERT_TRUE(EnableRecompute(*b->blocks(), "1").ok());
  std::vector<Stage> stages = b->Stages();
  EXPECT_EQ(stages[1].modules[0]->type_name(), "Recompute");
  EXPECT_EQ(stages[1].name, "blocks.0");  // names do not change
  ExpectBitwiseEqual(Whole(*a), StageByStage(*b));
}

TEST(GptStagesTest, TiedEmbeddingIsSharedByFirstAndLastStage) {
  auto gpt = Model(/*tied=*/true);
  std::vector<Stage> stages = gpt->Stages();
  std::vector<SharedParameter> shared = ParametersSharedAcrossStages(stages);
  ASSERT_EQ(shared.size(), 1u);
  EXPECT_EQ(shared[0].param->name(), "embed.wte");
  EXPECT_EQ(shared[0].stages, (std::vector<int>{0, static_cast<int>(stages.size()) - 1}));
  auto untied = Model(/*tied=*/false);
  EXPECT_TRUE(ParametersSharedAcrossStages(untied->Stages()).empty());
}

TEST(GptStagesTest, TiedGradientIsTheSumOfBothStagesContributions) {
  // Run the embedding stage and the head stage as if on two ranks: each
  // accumulates its own part of d(wte); their sum is the model's gradient.
  auto whole = Model();
  Result ref = Whole(*whole);
  auto gpt = Model();
  RunContext ctx = Ctx();
  std::vector<Stage> stages = gpt->Stages();
  const int n = static_cast<int>(stages.size());
  Parameter* wte = gpt->FindParameter("embed.wte");
  Tensor h = *ForwardStages(ctx, stages, 0, n, Inputs(), {&Targets(), 1.0f / 16});
  Tensor dh = *BackwardStages(ctx, stages, 1, n, Tensor());
  std::vector<float> head_part = Values(wte->grad);
  ASSERT_TRUE(wte->grad.Zero().ok());
  ASSERT_TRUE(BackwardStages(ctx, stages, 0, 1, dh).ok());
  std::vector<float> embed_part = Values(wte->grad);
  const std::vector<float>& total = ref.grads.at("embed.wte");
  double max_err = 0;
  for (size_t i = 0; i < total.size(); ++i) {
    max_err = std::max<double>(max_err, std::abs(head_part[i] + embed_part[i] - total[i]));
  }
  EXPECT_LT(max_err, 1e-6);
  EXPECT_GT(*std::max_element(head_part.begin(), head_part.end()), 0.f);
  (void)h;
}

TEST(GptStagesTest, LossStageNeedsTargets) {
  auto gpt = Model();
  RunContext ctx = Ctx();
  std::vector<Stage> stages = gpt->Stages();
  const int n = static_cast<int>(stages.size());
  Tensor h = *ForwardStages(ctx, stages, 0, n - 1, Inputs());
  absl::Status s = ForwardStages(ctx, stages, n - 1, n, h).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ends in a loss"), std::string::npos) << s;
  EXPECT_FALSE(ForwardStages(ctx, stages, 2, 1, h).ok());
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// Model::StageInput states what each stage's predecessor outputs, as a
// pipeline's dry run (the memory estimate) allocates it: the same shape and
// dtype as running the stages; out of range is an error.
TEST(GptStagesTest, StageInputIsWhatThePreviousStageOutputs) {
  std::unique_ptr<Gpt> gpt = Model();
  RunContext ctx = Ctx();
  ctx.training = false;
  const StageBatch part{Inputs(), Targets(), std::nullopt};
  const std::vector<Stage> stages = gpt->Stages();
  Tensor h = Inputs();
  for (int s = 1; s < static_cast<int>(stages.size()); ++s) {
    absl::StatusOr<Tensor> out = ForwardStage(ctx, stages[s - 1], h);
    ASSERT_TRUE(out.ok()) << out.status();
    h = *out;
    absl::StatusOr<StageTensor> stated = gpt->StageInput(ctx, part, s);
    ASSERT_TRUE(stated.ok()) << stated.status();
    EXPECT_EQ(*stated, StageTensor::Of(h)) << stages[s].name << ": stated "
                                           << stated->ToString() << ", ran "
                                           << StageTensor::Of(h).ToString();
  }
  EXPECT_FALSE(gpt->StageInput(ctx, part, 0).ok());  // token ids: the batch itself
  EXPECT_FALSE(gpt->StageInput(ctx, part, static_cast<int>(stages.size())).ok());
}

}  // namespace
}  // namespace weft
