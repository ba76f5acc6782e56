// The placement-aware gradient norm: two tensor-parallel ranks (gloo
// threads) holding halves of a Shard(0) parameter and full copies of a
// replicated one get exactly the single-process norm: the halves summed,
// the copies counted once.
#include "core/parallel/grad_norm.h"

#include <cmath>
#include <vector>

#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "core/kernels/kernel_ops.h"
#include "core/nn/parameter.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

std::vector<float> Range(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i + 1);
  return v;
}

double SumSq(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return s;
}

TEST(GradNormTest, ShardedSummedReplicatedCountedOnce) {
  const std::vector<float> w = Range(8, 0.5f), b = Range(3, 1.0f);
  const double expected = SumSq(w) + SumSq(b);
  auto results = comm::testing::RunRanksInThreads(2, [&](const comm::testing::RankContext& rc)
                                                         -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(auto tp, rc.NewGroup("gloo"));
    Parameter weight("weight", {4, 2}, InitSpec::Zeros(), true);
    Placement pl;
    pl.Shard("tp", 0, rc.rank, 2);
    WEFT_RETURN_IF_ERROR(weight.SetPlacement(pl));
    std::vector<float> half(w.begin() + 4 * rc.rank, w.begin() + 4 * rc.rank + 4);
    WEFT_ASSIGN_OR_RETURN(weight.grad, Tensor::FromFloats(half, {2, 2}));
    Parameter bias("bias", {3}, InitSpec::Zeros(), false);
    WEFT_ASSIGN_OR_RETURN(bias.grad, Tensor::FromFloats(b, {3}));
    std::vector<OptimTarget> targets = {{"weight", weight.grad, weight.grad, true, &weight},
                                        {"bias", bias.grad, bias.grad, false, &bias}};
    WEFT_ASSIGN_OR_RETURN(KernelOps * ops, GetKernelOps(DeviceType::kCPU));
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros({1}, DType::kF32, Device::Cpu()));
    WEFT_RETURN_IF_ERROR(GradNormSquared(*ops, KernelContext{Device::Cpu(), nullptr}, targets,
                                         tp.get(), out));
    WEFT_ASSIGN_OR_RETURN(std::vector<float> got, out.ToFloats());
    if (std::fabs(got[0] - expected) > 1e-4 * expected) {
      return absl::InternalError(absl::StrCat("rank ", rc.rank, ": norm^2 ", got[0],
                                              ", expected ", expected));
    }
    // Without a model-parallel group every target counts as local: the
    // half of the sharded weight only.
    WEFT_RETURN_IF_ERROR(GradNormSquared(*ops, KernelContext{Device::Cpu(), nullptr}, targets,
                                         nullptr, out));
    WEFT_ASSIGN_OR_RETURN(got, out.ToFloats());
    const double local = SumSq(half) + SumSq(b);
    if (std::fabs(got[0] - local) > 1e-4 * local) {
      return absl::InternalError(absl::StrCat("local norm^2 ", got[0], ", expected ", local));
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(comm::testing::AllRanksOk(results).ok()) << comm::testing::AllRanksOk(results);
}

}  // namespace
}  // namespace weft
