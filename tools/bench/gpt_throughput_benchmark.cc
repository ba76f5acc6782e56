// GPT training throughput, the same step //models/gpt:train runs (data
// loader, forward, fused loss, backward, clipping, AdamW, one loss read),
// on synthetic tokens so no dataset is needed:
//
//   bazel run -c opt //tools/bench:gpt_throughput -- --device=cuda
//       [--global_batch=16 --micro_batch=16 --seq_len=1024 --steps=30 ...]
//
// Defaults are GPT-2 124M (12L 12H 768d, vocab 50257 padded to 50304,
// T=1024, bf16, AdamW). Any GptJob flag works (--n_layer, --dtype, ...).
// Prints a JSON summary: median step time over the steps after --warmup,
// tokens/s and MFU with 6N + 6LTd FLOPs per token. Compare with
// tools/bench/gpt_throughput_torch.py on the same GPU, in one command.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "tools/train_main/train_main.h"
#include "core/runtime/function_job.h"
#include "core/runtime/trainer.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft {
namespace {

// Deterministic pseudo-random token windows.
class RandomTokens : public data::Dataset {
 public:
  RandomTokens(int64_t samples, int64_t seq_len, int64_t vocab)
      : samples_(samples), t_(seq_len), vocab_(vocab) {}
  int64_t num_samples() const override { return samples_; }
  std::vector<data::FieldSpec> fields() const override {
    return {{"inputs", DType::kI32, {t_}}, {"targets", DType::kI32, {t_}}};
  }
  absl::Status Fill(int64_t index, absl::Span<void* const> dst) const override {
    std::mt19937 rng(static_cast<uint32_t>(index * 7919 + 17));
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab_ - 1));
    auto* x = static_cast<int32_t*>(dst[0]);
    auto* y = static_cast<int32_t*>(dst[1]);
    int32_t prev = tok(rng);
    for (int64_t i = 0; i < t_; ++i) {
      x[i] = prev;
      prev = tok(rng);
      y[i] = prev;
    }
    return absl::OkStatus();
  }
  std::string Describe() const override { return "random tokens"; }

 private:
  int64_t samples_, t_, vocab_;
};

GptJob Gpt2Small() {
  GptJob job;
  TrainConfig* t = job.mutable_train();
  t->set_device("cuda");
  t->set_dtype("auto");
  t->set_steps(30);
  t->set_global_batch(16);
  t->set_micro_batch(16);
  t->set_seq_len(1024);
  t->set_log_every(1);
  t->set_quiet(true);
  t->mutable_optim()->set_lr(6e-4f);
  t->mutable_optim()->set_warmup_steps(0);
  t->mutable_data()->set_num_workers(4);
  GptConfig* m = job.mutable_model();
  m->set_n_layer(12);
  m->set_n_head(12);
  m->set_d_model(768);
  m->set_vocab_size(50257);
  m->set_vocab_pad_multiple(128);
  m->set_max_seq_len(1024);
  return job;
}

absl::Status Run(const GptJob& job, int warmup) {
  Trainer::Options o;
  o.config = job.train();
  auto open_data = [&](const data::DataLoader::Options& base) -> absl::StatusOr<DataLoaders> {
    const int64_t samples = std::max<int64_t>(4096, base.batch_size * base.world_size * 64);
    auto ds = std::make_shared<RandomTokens>(samples, job.train().seq_len(),
                                             job.model().vocab_size());
    WEFT_ASSIGN_OR_RETURN(auto loader, data::DataLoader::Create(ds, base));
    return DataLoaders{std::move(loader), nullptr, job.model().vocab_size()};
  };
  auto make_model = [&](const DataLoaders&) -> absl::StatusOr<std::unique_ptr<Model>> {
    WEFT_ASSIGN_OR_RETURN(auto gpt, Gpt::Create(job.model(), job.train().seq_len()));
    return std::unique_ptr<Model>(std::move(gpt));
  };
  o.job = std::make_shared<FunctionJob>(open_data, make_model);
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(std::move(o)));
  std::vector<StepStats> measured;
  for (int64_t i = 0; i < job.train().steps(); ++i) {
    WEFT_ASSIGN_OR_RETURN(StepStats s, trainer->TrainStep());
    std::printf(
        "step %3lld  loss %.4f  %8.2f ms  %10.0f tok/s  mfu %.3f  data wait %.3f ms  issue %.2f ms\n",
        static_cast<long long>(s.step), s.loss, s.step_ms, s.tokens_per_s, s.mfu, s.data_wait_ms,
        s.host_issue_ms);
    if (i >= warmup) measured.push_back(s);
  }
  if (measured.empty()) return absl::InvalidArgumentError("--steps must exceed --warmup");
  std::sort(measured.begin(), measured.end(),
            [](const StepStats& a, const StepStats& b) { return a.step_ms < b.step_ms; });
  double wait = 0, total = 0;
  for (const StepStats& s : measured) {
    wait += s.data_wait_ms;
    total += s.step_ms;
  }
  const StepStats& med = measured[measured.size() / 2];
  std::printf(
      "{\"bench\":\"gpt_throughput\",\"impl\":\"weft\",\"model\":\"%s\",\"device\":\"%s\","
      "\"dtype\":\"%s\",\"global_batch\":%lld,\"seq_len\":%lld,\"step_ms_median\":%.3f,"
      "\"tokens_per_s\":%.1f,\"mfu\":%s,\"peak_mem_mb\":%.1f,\"data_wait_fraction\":%.5f,"
      "\"host_issue_ms\":%.3f}\n",
      trainer->model().Summary().c_str(), job.train().device().c_str(),
      std::string(DTypeName(trainer->context().compute_dtype)).c_str(),
      static_cast<long long>(job.train().global_batch()),
      static_cast<long long>(job.train().seq_len()), med.step_ms, med.tokens_per_s,
      std::isfinite(med.mfu) ? absl::StrFormat("%.4f", med.mfu).c_str() : "null",
      med.peak_mem_mb, wait / total, med.host_issue_ms);
  return absl::OkStatus();
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::GptJob job = weft::Gpt2Small();
  int warmup = 5;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (absl::StartsWith(argv[i], "--warmup=")) {
      if (!absl::SimpleAtoi(argv[i] + 9, &warmup)) warmup = 5;
    } else {
      rest.push_back(argv[i]);
    }
  }
  return weft::TrainMain(static_cast<int>(rest.size()), rest.data(),
                         "GPT training throughput (defaults: GPT-2 124M on CUDA).\n"
                         "usage: gpt_throughput [--device=cuda] [--warmup=5] [--flag=value ...]",
                         &job, [&] { return weft::Run(job, warmup); });
}
