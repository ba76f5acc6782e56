// PipeLinks checks what arrives against what was stated: on 2 gloo ranks
// (threads), an activation of the stated shape and the gradient of what was
// sent go through and a misstated shape fails; on the meta device (a dry
// run, whose links deliver no header) the stated shape is allocated, and an
// unknown one is an error, not a guess.
#include "strategies/pp/pipe_links.h"

#include <memory>

#include "absl/strings/match.h"
#include "comm/store/hash_store.h"
#include "core/base/status_macros.h"
#include "comm/testing/multiprocess.h"
#include "gtest/gtest.h"

namespace weft::pp {
namespace {

absl::StatusOr<std::unique_ptr<comm::DeviceMesh>> PpMesh(int rank, std::shared_ptr<comm::Store> store,
                                                         const std::string& backend) {
  return comm::DeviceMesh::Create({{"pp", 2}}, rank, 2, std::move(store),
                                  {.backend = backend});
}

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

TEST(PipeLinksTest, ChecksReceivedHeadersAgainstTheStatement) {
  const StageTensor act{{2, 3, 4}, DType::kF32};
  auto results = comm::testing::RunRanks(
      comm::testing::RankMode::kThreads, 2,
      [&](const comm::testing::RankContext& rc) -> absl::Status {
        WEFT_ASSIGN_OR_RETURN(auto mesh, PpMesh(rc.rank, rc.store, "gloo"));
        WEFT_ASSIGN_OR_RETURN(auto links, PipeLinks::Create(*mesh));
        WEFT_ASSIGN_OR_RETURN(RunContext ctx, RunContext::Create(Device::Cpu(), DType::kF32));
        if (rc.rank == 0) {
          WEFT_ASSIGN_OR_RETURN(Tensor x, ctx.Zeros(act.shape, act.dtype));
          WEFT_RETURN_IF_ERROR(links->SendForward(x, /*tag=*/5, ctx.stream));
          // The gradient is expected to have the sent activation's shape.
          WEFT_ASSIGN_OR_RETURN(Tensor dy, links->RecvBackward(5, ctx));
          WEFT_RETURN_IF_ERROR(Expect(StageTensor::Of(dy) == act, "gradient shape"));
          // Rank 1 stops at this one's header: the body's send may fail.
          WEFT_RETURN_IF_ERROR(links->SendForward(x, /*tag=*/6, ctx.stream));
          (void)links->WaitSends();
          return absl::OkStatus();
        }
        WEFT_ASSIGN_OR_RETURN(Tensor x, links->RecvForward(5, ctx, act));
        WEFT_RETURN_IF_ERROR(Expect(StageTensor::Of(x) == act, "activation shape"));
        WEFT_RETURN_IF_ERROR(links->SendBackward(x, 5, ctx.stream));
        WEFT_RETURN_IF_ERROR(links->WaitSends());
        // A misstated stage input: the real header disagrees, and says so.
        const StageTensor wrong{{2, 6, 4}, DType::kF32};
        absl::StatusOr<Tensor> bad = links->RecvForward(6, ctx, wrong);
        WEFT_RETURN_IF_ERROR(Expect(bad.status().code() == absl::StatusCode::kInternal,
                                    "a mismatch error, got " + bad.status().ToString()));
        return Expect(absl::StrContains(bad.status().message(), "(2, 3, 4) f32") &&
                          absl::StrContains(bad.status().message(), "(2, 6, 4) f32"),
                      "both shapes in " + bad.status().ToString());
      });
  EXPECT_TRUE(comm::testing::AllRanksOk(results).ok()) << comm::testing::AllRanksOk(results);
}

TEST(PipeLinksTest, DryRunAllocatesTheStatementAndRefusesToGuess) {
  // Rank 1 of 2 alone, over meta groups: nothing arrives.
  auto mesh = PpMesh(1, std::make_shared<comm::HashStore>(), "meta");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto links = PipeLinks::Create(**mesh);
  ASSERT_TRUE(links.ok()) << links.status();
  auto ctx = RunContext::Create(Device::Meta(), DType::kBF16);
  ASSERT_TRUE(ctx.ok()) << ctx.status();

  const StageTensor act{{4, 16, 32}, DType::kBF16};
  absl::StatusOr<Tensor> x = (*links)->RecvForward(3, *ctx, act);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_TRUE(x->device().is_meta());
  EXPECT_EQ(StageTensor::Of(*x), act);

  absl::StatusOr<Tensor> unknown =
      (*links)->RecvForward(4, *ctx, absl::UnimplementedError("no statement"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kFailedPrecondition) << unknown.status();
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "StageInput")) << unknown.status();

  // A gradient for nothing sent is unknown too; for what was sent, its shape.
  EXPECT_FALSE((*links)->RecvBackward(7, *ctx).ok());
  ASSERT_TRUE((*links)->SendForward(*x, 7, ctx->stream).ok());
  absl::StatusOr<Tensor> dy = (*links)->RecvBackward(7, *ctx);
  ASSERT_TRUE(dy.ok()) << dy.status();
  EXPECT_EQ(StageTensor::Of(*dy), act);
  EXPECT_TRUE((*links)->WaitSends().ok());
}

}  // namespace
}  // namespace weft::pp
