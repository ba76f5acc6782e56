// Under a zero-bubble pipeline's split backward (RunContext::
// defer_weight_grads) the tp layers compute input gradients in B and queue
// their weight and bias gradients for W, like core/nn/linear.cc: after B
// the parameter gradients are untouched, after W they equal a plain
// backward's bitwise, even when the caller overwrote dy in between (W
// keeps its own copy of a layer's dy), and dx equals the plain backward's.
// 2 gloo ranks.
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "comm/testing/multiprocess.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"
#include "gtest/gtest.h"
#include "strategies/tp/parallel_linear.h"
#include "strategies/tp/vocab_parallel.h"

namespace weft::tp {
namespace {

constexpr int64_t kRows = 6, kIn = 8, kOut = 12;

Tensor Ramp(Shape shape, float scale) {
  std::vector<float> v(NumElements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i + 1));
  return *Tensor::FromFloats(v, shape);
}

std::vector<std::vector<float>> Grads(Module& m) {
  std::vector<std::vector<float>> out;
  for (Parameter* p : m.Parameters()) out.push_back(*p->grad.ToFloats());
  return out;
}

// One layer's forward, then backward plain and split: what must hold.
// `reused`: the layer's caller may overwrite dy after B (a residual
// gradient; not the head's dlogits, which come fresh from the loss).
absl::Status CheckSplit(Module& layer, const Tensor& x, const Tensor& dy_values,
                        bool reused = true) {
  WEFT_RETURN_IF_ERROR(MaterializeParameters(layer, {.seed = 3}));
  WEFT_ASSIGN_OR_RETURN(RunContext ctx, RunContext::Create(Device::Cpu(), DType::kF32));
  auto backward = [&](bool split, std::vector<float>* dx) -> absl::Status {
    WEFT_RETURN_IF_ERROR(ZeroGrads(layer));
    WEFT_RETURN_IF_ERROR(layer.CallForward(ctx, x).status());
    Tensor dy = *Tensor::Empty(dy_values.shape(), DType::kF32);
    WEFT_RETURN_IF_ERROR(dy.CopyFrom(dy_values));
    ctx.defer_weight_grads = split;
    absl::StatusOr<Tensor> g = layer.CallBackward(ctx, dy);
    ctx.defer_weight_grads = false;
    WEFT_RETURN_IF_ERROR(g.status());
    WEFT_ASSIGN_OR_RETURN(*dx, g->ToFloats());
    if (!split) return absl::OkStatus();
    if (ctx.store().NumDeferred(ctx.slot) == 0) return absl::InternalError("B queued no W work");
    for (const std::vector<float>& gr : Grads(layer)) {
      for (float v : gr) {
        if (v != 0.f) return absl::InternalError("a weight gradient was written in B");
      }
    }
    if (reused) WEFT_RETURN_IF_ERROR(dy.Zero());  // the caller reuses dy's buffer before W
    return ctx.store().RunDeferred(ctx.slot);
  };
  std::vector<float> dx_plain, dx_split;
  WEFT_RETURN_IF_ERROR(backward(false, &dx_plain));
  const std::vector<std::vector<float>> plain = Grads(layer);
  WEFT_RETURN_IF_ERROR(backward(true, &dx_split));
  if (dx_split != dx_plain) return absl::InternalError(layer.type_name() + ": dx differs");
  if (Grads(layer) != plain) return absl::InternalError(layer.type_name() + ": W's grads differ");
  return absl::OkStatus();
}

TEST(SplitBackwardTest, TpLayersQueueTheirWeightGradientsForW) {
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, 2,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        WEFT_ASSIGN_OR_RETURN(auto group, rc.NewGroup("gloo", {.name = "tp"}));
        const TpComm tp{.group = group};
        WEFT_ASSIGN_OR_RETURN(auto column,
                              ColumnParallelLinear::Create(kIn, kOut, {.gelu = true}, tp));
        WEFT_RETURN_IF_ERROR(
            CheckSplit(*column, Ramp({kRows, kIn}, 1.f), Ramp({kRows, kOut / 2}, 0.5f)));
        WEFT_ASSIGN_OR_RETURN(auto packed,
                              ColumnParallelLinear::Create(kIn, kOut, {.packed = 3}, tp));
        WEFT_RETURN_IF_ERROR(
            CheckSplit(*packed, Ramp({kRows, kIn}, 1.f), Ramp({kRows, kOut / 2}, 0.5f)));
        WEFT_ASSIGN_OR_RETURN(auto row, RowParallelLinear::Create(kOut, kIn, {}, tp));
        WEFT_RETURN_IF_ERROR(
            CheckSplit(*row, Ramp({kRows, kOut / 2}, 1.f), Ramp({kRows, kIn}, 0.5f)));
        WEFT_ASSIGN_OR_RETURN(auto head,
                              VocabParallelHead::Create(kOut, kIn, InitSpec::Normal(0.5f), tp));
        return CheckSplit(*head, Ramp({kRows, kIn}, 1.f), Ramp({kRows, kOut / 2}, 0.5f),
                          /*reused=*/false);
      });
  EXPECT_TRUE(comm::testing::AllRanksOk(results).ok()) << comm::testing::AllRanksOk(results);
}

}  // namespace
}  // namespace weft::tp
