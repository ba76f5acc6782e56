// The step breakdown, traces and GPU sampling on CUDA: the parts still add
// up to step_ms when they are device times between events, measuring them
// adds no host synchronization (still exactly one per step, with a trace
// being written), NCCL collectives reach the trace, and NVML samples come
// from the real driver.
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "absl/time/clock.h"
#include "comm/store/hash_store.h"
#include "core/runtime/gpu_sampler.h"
#include "core/base/json.h"
#include "core/runtime/step_timer.h"
#include "core/runtime/trace_writer.h"
#include "core/runtime/trainer.h"
#include "core/tensor/device_backend.h"
#include "gtest/gtest.h"
#include "tests/tiny_gpt.h"

namespace weft {
namespace {

TEST(ObservabilityGpuTest, PartsAddUpWithOneHostSyncPerStepAndTracesHoldNcclOps) {
  absl::StatusOr<DeviceBackend*> backend = GetDeviceBackend(DeviceType::kCUDA);
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (const std::string strategy : {"", "ddp", "fsdp"}) {
    SCOPED_TRACE("strategy '" + strategy + "'");
    const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/trace_" + strategy;
    GptJob job = testing::TinyGptJob(testing::WriteCorpus(std::getenv("TEST_TMPDIR")));
    TrainConfig* t = job.mutable_train();
    t->set_device("cuda");
    t->set_dtype("bf16");
    t->set_global_batch(8);
    t->set_micro_batch(4);
    t->set_trace_dir(dir);
    t->set_trace_steps("3:4");
    t->mutable_parallel()->set_strategy(strategy);
    t->mutable_parallel()->set_backend("nccl");
    JobTopology topology;
    topology.store = std::make_shared<comm::HashStore>();
    auto trainer = testing::MakeGptTrainer(job, topology);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    for (int i = 0; i < 2; ++i) ASSERT_TRUE((*trainer)->TrainStep().ok());  // warm-up
    const int64_t before = (*backend)->HostSyncCountOnThisThread();
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<StepStats> s = (*trainer)->TrainStep();  // steps 3-5: 3 and 4 traced
      ASSERT_TRUE(s.ok()) << s.status();
      const double sum = s->data_wait_ms + s->forward_ms + s->backward_ms + s->exposed_comm_ms +
                         s->optimizer_ms + s->other_ms;
      EXPECT_NEAR(sum, s->step_ms, kSumSlackMs);
      EXPECT_GT(s->forward_ms, 0);
      EXPECT_GT(s->backward_ms, 0);
      EXPECT_GT(s->optimizer_ms, 0);
      EXPECT_GE(s->exposed_comm_ms, 0);
      std::printf(
          "cuda %s step %lld: step %.3f ms = data %.3f fwd %.3f bwd %.3f comm %.3f "
          "opt %.3f other %.3f (comm %.3f MB)\n",
          strategy.c_str(), static_cast<long long>(s->step), s->step_ms, s->data_wait_ms,
          s->forward_ms, s->backward_ms, s->exposed_comm_ms, s->optimizer_ms, s->other_ms,
          s->comm_mb);
    }
    EXPECT_EQ((*backend)->HostSyncCountOnThisThread() - before, 3);

    std::ifstream in(RankTracePath(dir, 0));
    ASSERT_TRUE(in.good()) << "no trace in " << dir;
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<JsonValue> trace = ParseJson(text.str());
    ASSERT_TRUE(trace.ok()) << trace.status();
    std::set<std::string> cats, phases;
    for (const JsonValue& e : trace->Find("traceEvents")->array) {
      if (const JsonValue* c = e.Find("cat")) cats.insert(c->string);
      if (e.Find("cat") != nullptr && e.Find("cat")->string == "phase") {
        phases.insert(e.Find("name")->string);
      }
    }
    EXPECT_TRUE(cats.contains("step"));
    EXPECT_TRUE(phases.contains("forward") && phases.contains("backward"));
    if (!strategy.empty()) {
      EXPECT_TRUE(cats.contains("comm")) << "no NCCL ops in the trace";
    }
  }
}

TEST(ObservabilityGpuTest, NvmlSamplesTheRealGpu) {
  GpuSampler sampler({.device = 0, .period = absl::Milliseconds(50)});
  ASSERT_EQ(sampler.Start(), "");
  std::vector<GpuSample> samples;
  for (int i = 0; i < 100 && samples.size() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    for (const GpuSample& s : sampler.Drain()) samples.push_back(s);
  }
  ASSERT_GE(samples.size(), 2u);
  const GpuSample& s = samples.back();
  std::printf("nvml: util %.0f%% mem %.0f/%.0f MB power %.1f W temp %.0f C\n", s.util_pct,
              s.mem_used_mb, s.mem_total_mb, s.power_w, s.temp_c);
  EXPECT_GE(s.util_pct, 0);
  EXPECT_LE(s.util_pct, 100);
  EXPECT_GT(s.mem_total_mb, 1000);
  EXPECT_GT(s.mem_used_mb, 0);
  EXPECT_GT(s.power_w, 0);
  EXPECT_GT(s.temp_c, 0);
}

}  // namespace
}  // namespace weft
