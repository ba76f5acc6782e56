// ExpertMlps: rows in runs computed in any order, from another buffer,
// match one pass (what the ep dispatcher relies on to overlap), and two
// halves of every expert's hidden units with their partial sums added (the
// bias on one half only) match the whole experts (what tp relies on).
#include "core/nn/expert_mlps.h"

#include <cmath>
#include <vector>

#include "core/nn/materialize.h"
#include "core/nn/swiglu_mlp.h"
#include "core/testing/grad_check.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

using ::weft::testing::RandomTensor;
using ::weft::testing::Values;

constexpr int kExperts = 2;
constexpr int64_t kC = 6, kH = 8;

RunContext Ctx() { return *RunContext::Create(Device::Cpu(), DType::kF32); }

void ExpectNear(const Tensor& a, const Tensor& b, const char* what) {
  const std::vector<float> x = Values(a), y = Values(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5) << what << " at " << i;
}

void Fill(ExpertMlps& m, uint64_t seed) {
  ASSERT_TRUE(MaterializeParameters(m, {.seed = 7}).ok());
  for (Parameter* p : m.Parameters()) {
    ASSERT_TRUE(p->value.CopyFrom(RandomTensor(p->shape(), seed + p->numel(), 0.5f)).ok());
  }
}

Tensor Copy(const Tensor& t) {
  Tensor c = *Tensor::Empty(t.shape(), t.dtype());
  EXPECT_TRUE(c.CopyFrom(t).ok());
  return c;
}

TEST(ExpertMlpsTest, RunsInAnyOrderFromAnotherBufferMatchOnePass) {
  // Two runs of two local experts: {2, 3} and {1, 4} rows.
  const std::vector<int64_t> counts = {2, 3, 1, 4};
  const Tensor x = RandomTensor({10, kC}, 1), dy = RandomTensor({10, kC}, 2);
  ExpertMlps one(kExperts, kC, kH, 0.5f, 0.5f), runs(kExperts, kC, kH, 0.5f, 0.5f);
  Fill(one, 3);
  Fill(runs, 3);
  RunContext c1 = Ctx(), c2 = Ctx();
  Tensor y1 = *one.ForwardGrouped(c1, x, counts);
  Tensor dx1 = *one.BackwardGrouped(c1, dy);
  // Run 1 first, each run read from copies (the dispatcher's send buffer).
  const Tensor x2 = Copy(x), dy2 = Copy(dy);
  const std::vector<int64_t> start = {0, 5, 10};
  auto rows = [&](const Tensor& t) {
    return [&, t](int r) -> absl::StatusOr<Tensor> { return t.Slice(0, start[r], start[r + 1]); };
  };
  absl::StatusOr<Tensor> y2 = runs.ForwardRuns(c2, x, counts, {1, 0}, rows(x2));
  ASSERT_TRUE(y2.ok()) << y2.status();
  absl::StatusOr<Tensor> dx2 = runs.BackwardRuns(c2, {1, 0}, rows(dy2));
  ASSERT_TRUE(dx2.ok()) << dx2.status();
  ExpectNear(*y2, y1, "y");
  ExpectNear(*dx2, dx1, "dx");
  for (int i = 0; i < 4; ++i) {
    ExpectNear(runs.expert_parameters()[i]->grad, one.expert_parameters()[i]->grad, "grad");
  }
}

// Sums nothing (one process plays both tp ranks); says whether its half
// adds the output bias.
class Halves : public ExpertPartialSums {
 public:
  explicit Halves(bool bias) : bias_(bias) {}
  bool adds_output_bias() const override { return bias_; }
  absl::Status Sum(RunContext&, Tensor&) override { return absl::OkStatus(); }

 private:
  const bool bias_;
};

// Halves of every expert's hidden units, cut along the dimensions
// HiddenSplits() names (the contract tp splits by), with their partial sums
// added and the output bias on one half only, match the whole experts.
void CheckHiddenHalves(ExpertActivation act) {
  const std::vector<int64_t> counts = {4, 3};
  const Tensor x = RandomTensor({7, kC}, 1), dy = RandomTensor({7, kC}, 2);
  ExpertMlps whole(kExperts, kC, kH, 0.5f, 0.5f, act);
  Fill(whole, 5);
  const std::vector<ExpertMlps::HiddenSplit> wsplit = whole.HiddenSplits();
  // Half h holds hidden units [h * H/2, (h + 1) * H/2) of every expert.
  std::vector<std::unique_ptr<ExpertMlps>> half;
  for (int h = 0; h < 2; ++h) {
    half.push_back(std::make_unique<ExpertMlps>(kExperts, kC, kH / 2, 0.5f, 0.5f, act));
    ASSERT_TRUE(MaterializeParameters(*half[h], {.seed = 7}).ok());
    const int64_t b = h * kH / 2, e = b + kH / 2;
    const std::vector<ExpertMlps::HiddenSplit> split = half[h]->HiddenSplits();
    ASSERT_EQ(split.size(), wsplit.size());
    for (size_t i = 0; i < split.size(); ++i) {
      ASSERT_TRUE(split[i].parameter->value.CopyFrom(
          Copy(wsplit[i].parameter->value.Slice(wsplit[i].dim, b, e))).ok());
    }
    if (act == ExpertActivation::kGelu) {
      ASSERT_TRUE(half[h]->expert_parameters()[3]->value.CopyFrom(
          whole.expert_parameters()[3]->value).ok());
    }
    half[h]->set_partial_sums(std::make_shared<Halves>(h == 0));
  }
  RunContext c = Ctx(), c0 = Ctx(), c1 = Ctx();
  const std::vector<float> y = Values(*whole.ForwardGrouped(c, x, counts));
  const std::vector<float> dx = Values(*whole.BackwardGrouped(c, dy));
  const std::vector<float> y0 = Values(*half[0]->ForwardGrouped(c0, x, counts));
  const std::vector<float> y1 = Values(*half[1]->ForwardGrouped(c1, x, counts));
  const std::vector<float> dx0 = Values(*half[0]->BackwardGrouped(c0, dy));
  const std::vector<float> dx1 = Values(*half[1]->BackwardGrouped(c1, dy));
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y0[i] + y1[i], y[i], 1e-5) << "y at " << i;
    EXPECT_NEAR(dx0[i] + dx1[i], dx[i], 1e-5) << "dx at " << i;
  }
  // Split weights: each half's gradient is its slice; the output bias's
  // gradient is whole on both.
  for (int h = 0; h < 2; ++h) {
    const int64_t b = h * kH / 2, e = b + kH / 2;
    const std::vector<ExpertMlps::HiddenSplit> split = half[h]->HiddenSplits();
    for (size_t i = 0; i < split.size(); ++i) {
      ExpectNear(split[i].parameter->grad,
                 Copy(wsplit[i].parameter->grad.Slice(wsplit[i].dim, b, e)),
                 split[i].parameter->name().c_str());
    }
    if (act == ExpertActivation::kGelu) {
      ExpectNear(half[h]->expert_parameters()[3]->grad, whole.expert_parameters()[3]->grad,
                 "proj_bias grad");
    }
  }
}

TEST(ExpertMlpsTest, HiddenHalvesWithPartialSumsMatchWholeExperts) {
  CheckHiddenHalves(ExpertActivation::kGelu);
}

TEST(ExpertMlpsTest, SwiGluHiddenHalvesMatchWholeExperts) {
  CheckHiddenHalves(ExpertActivation::kSwiGlu);
}

// SwiGLU experts compute, row by row, what a SwiGluMlp with the same
// expert's weights computes (the dense layer a Llama block uses).
TEST(ExpertMlpsTest, SwiGluExpertsMatchTheDenseSwiGluMlp) {
  const std::vector<int64_t> counts = {3, 4};
  const Tensor x = RandomTensor({7, kC}, 1), dy = RandomTensor({7, kC}, 2);
  ExpertMlps experts(kExperts, kC, kH, 0.5f, 0.5f, ExpertActivation::kSwiGlu);
  Fill(experts, 9);
  ASSERT_EQ(experts.expert_parameters().size(), 2u);
  EXPECT_EQ(experts.hidden(), kH);
  RunContext c = Ctx();
  const std::vector<float> y = Values(*experts.ForwardGrouped(c, x, counts));
  const std::vector<float> dx = Values(*experts.BackwardGrouped(c, dy));
  Parameter* gate_up = experts.expert_parameters()[0];
  Parameter* down = experts.expert_parameters()[1];
  int64_t row = 0;
  for (int j = 0; j < kExperts; ++j) {
    SwiGluMlp mlp(kC, kH, 0.5f, 0.5f);
    ASSERT_TRUE(MaterializeParameters(mlp, {.seed = 7}).ok());
    Parameter* gu = mlp.FindParameter("gate_up.weight");
    Parameter* dn = mlp.FindParameter("down.weight");
    ASSERT_NE(gu, nullptr);
    ASSERT_NE(dn, nullptr);
    ASSERT_TRUE(gu->value.CopyFrom(Copy(gate_up->value.Select(0, j)).View({2 * kH, kC})).ok());
    ASSERT_TRUE(dn->value.CopyFrom(Copy(down->value.Select(0, j))).ok());
    RunContext cj = Ctx();
    const int64_t e = row + counts[j];
    const std::vector<float> yj = Values(*mlp.Forward(cj, Copy(x.Slice(0, row, e))));
    const std::vector<float> dxj = Values(*mlp.Backward(cj, Copy(dy.Slice(0, row, e))));
    for (size_t i = 0; i < yj.size(); ++i) {
      EXPECT_NEAR(y[row * kC + i], yj[i], 1e-5) << "y, expert " << j;
      EXPECT_NEAR(dx[row * kC + i], dxj[i], 1e-5) << "dx, expert " << j;
    }
    ExpectNear(Copy(gate_up->grad.Select(0, j)).View({2 * kH, kC}), gu->grad, "gate_up grad");
    ExpectNear(Copy(down->grad.Select(0, j)), dn->grad, "down grad");
    row = e;
  }
}

}  // namespace
}  // namespace weft
