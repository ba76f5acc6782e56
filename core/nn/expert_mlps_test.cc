// ExpertMlps: rows in runs computed in any order, from another buffer,
// match one pass (what the ep dispatcher relies on to overlap), and two
// halves of every expert's hidden units with their partial sums added (the
// bias on one half only) match the whole experts (what tp relies on).
#include "core/nn/expert_mlps.h"

#include <cmath>
#include <vector>

#include "core/nn/materialize.h"
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

TEST(ExpertMlpsTest, HiddenHalvesWithPartialSumsMatchWholeExperts) {
  const std::vector<int64_t> counts = {4, 3};
  const Tensor x = RandomTensor({7, kC}, 1), dy = RandomTensor({7, kC}, 2);
  ExpertMlps whole(kExperts, kC, kH, 0.5f, 0.5f);
  Fill(whole, 5);
  // Half h holds hidden units [h * H/2, (h + 1) * H/2) of every expert.
  std::vector<std::unique_ptr<ExpertMlps>> half;
  for (int h = 0; h < 2; ++h) {
    half.push_back(std::make_unique<ExpertMlps>(kExperts, kC, kH / 2, 0.5f, 0.5f));
    ASSERT_TRUE(MaterializeParameters(*half[h], {.seed = 7}).ok());
    const std::vector<Parameter*> w = whole.expert_parameters(), p = half[h]->expert_parameters();
    const int64_t b = h * kH / 2, e = b + kH / 2;
    ASSERT_TRUE(p[0]->value.CopyFrom(w[0]->value.Slice(1, b, e)).ok());
    ASSERT_TRUE(p[1]->value.CopyFrom(w[1]->value.Slice(1, b, e)).ok());
    ASSERT_TRUE(p[2]->value.CopyFrom(w[2]->value.Slice(2, b, e)).ok());
    ASSERT_TRUE(p[3]->value.CopyFrom(w[3]->value).ok());
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
  const std::vector<Parameter*> w = whole.expert_parameters();
  for (int h = 0; h < 2; ++h) {
    const std::vector<Parameter*> p = half[h]->expert_parameters();
    const int64_t b = h * kH / 2, e = b + kH / 2;
    ExpectNear(p[0]->grad, Copy(w[0]->grad.Slice(1, b, e)), "fc_weight grad");
    ExpectNear(p[1]->grad, Copy(w[1]->grad.Slice(1, b, e)), "fc_bias grad");
    ExpectNear(p[2]->grad, Copy(w[2]->grad.Slice(2, b, e)), "proj_weight grad");
    ExpectNear(p[3]->grad, w[3]->grad, "proj_bias grad");
  }
}

}  // namespace
}  // namespace weft
