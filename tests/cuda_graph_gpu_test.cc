// --cuda_graph on a GPU: the captured and replayed step trains exactly like
// the eager one (bitwise losses and parameters, with gradient accumulation,
// clipping, dropout, recompute and an lr that changes every step), an evaluation between
// replays leaves them intact (the graph's memory is its own), a replay
// synchronizes the host once, and what a replay cannot repeat is refused.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comm/store/hash_store.h"
#include "core/runtime/trainer.h"
#include "core/tensor/device_backend.h"
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

GptJob GraphJob(bool graph) {
  GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
  TrainConfig* t = job.mutable_train();
  t->set_device("cuda");
  t->set_dtype("bf16");
  t->set_global_batch(16);  // 2 micro-batches of 8
  t->set_steps(8);
  t->mutable_optim()->set_grad_clip(0.5f);
  t->mutable_optim()->set_warmup_steps(4);  // lr changes at every step
  t->set_cuda_graph(graph);
  return job;
}

std::unique_ptr<Trainer> Make(const GptJob& job) {
  JobTopology topology;
  topology.store = std::make_shared<comm::HashStore>();
  absl::StatusOr<std::unique_ptr<Trainer>> t = testing::MakeGptTrainer(job, topology);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

void ExpectReplaysMatchEager(float dropout, bool recompute = false) {
  GptJob eager_job = GraphJob(false), graph_job = GraphJob(true);
  for (GptJob* job : {&eager_job, &graph_job}) {
    job->mutable_model()->set_dropout(dropout);
    job->mutable_train()->set_recompute(recompute);
  }
  std::unique_ptr<Trainer> eager = Make(eager_job), graph = Make(graph_job);
  ASSERT_NE(eager, nullptr);
  ASSERT_NE(graph, nullptr);
  absl::StatusOr<DeviceBackend*> backend = GetDeviceBackend(DeviceType::kCUDA);
  ASSERT_TRUE(backend.ok());
  for (int step = 1; step <= 8; ++step) {
    SCOPED_TRACE(step);
    absl::StatusOr<StepStats> a = eager->TrainStep();
    const int64_t syncs = (*backend)->HostSyncCountOnThisThread();
    absl::StatusOr<StepStats> b = graph->TrainStep();
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->loss, b->loss);
    EXPECT_EQ(a->grad_norm, b->grad_norm);
    // Step 3 is captured; 4 onwards are replays: the loss read only.
    if (step >= 4) {
      EXPECT_EQ((*backend)->HostSyncCountOnThisThread() - syncs, 1);
      // A replay is one launch: its step shows no forward or backward part,
      // the eager step does (so this cannot pass on an eager run).
      EXPECT_GT(a->forward_ms, 0.0);
      EXPECT_EQ(b->forward_ms, 0.0);
      EXPECT_EQ(b->backward_ms, 0.0);
    }
    if (step == 5) {
      // Evaluation runs eagerly between replays, on the shared allocator.
      absl::StatusOr<double> va = eager->Evaluate(5), vb = graph->Evaluate(5);
      ASSERT_TRUE(va.ok() && vb.ok());
      EXPECT_EQ(*va, *vb);
    }
  }
  auto pa = testing::ParameterSnapshot(*eager), pb = testing::ParameterSnapshot(*graph);
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(testing::MaxRelativeDifference(*pa, *pb), 0.0);
  EXPECT_GT(testing::MaxRelativeDifference(*pa, *testing::ParameterSnapshot(*Make(GraphJob(false)))),
            0.0);  // the comparison can tell trained from fresh parameters
  EXPECT_GT(graph->ModelMemory().activations.peak_allocated_bytes, 0);
}

TEST(CudaGraphGpuTest, ReplaysTrainBitwiseLikeEagerSteps) { ExpectReplaysMatchEager(0.0f); }

// Each replay reads its step's dropout seed from memory: new masks every
// step, the eager run's masks.
TEST(CudaGraphGpuTest, ReplaysDrawEachStepsDropoutMasks) { ExpectReplaysMatchEager(0.1f); }

// Recompute reruns each block's forward (dropout masks included) inside
// the captured backward.
TEST(CudaGraphGpuTest, ReplaysWithRecompute) { ExpectReplaysMatchEager(0.1f, true); }

void ExpectRefused(GptJob job, const std::string& why) {
  JobTopology topology;
  topology.store = std::make_shared<comm::HashStore>();
  absl::StatusOr<std::unique_ptr<Trainer>> t = testing::MakeGptTrainer(job, topology);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find(why), std::string::npos) << t.status();
}

TEST(CudaGraphGpuTest, RefusesWhatAReplayCannotRepeat) {
  GptJob moe = GraphJob(true);
  moe.mutable_model()->set_moe_every(1);
  moe.mutable_model()->set_num_experts(4);
  ExpectRefused(moe, "mixture-of-experts");
  GptJob ddp = GraphJob(true);
  ddp.mutable_train()->mutable_parallel()->set_strategy("ddp");
  ddp.mutable_train()->mutable_parallel()->set_backend("nccl");
  ExpectRefused(ddp, "one process with no strategy but recompute");
}

}  // namespace
}  // namespace weft
