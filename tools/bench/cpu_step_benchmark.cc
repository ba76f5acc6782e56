// CPU training step time (ms/step, median after warmup) for a table of GPT
// and Llama shapes and the 784-256-128-10 MLP, on synthetic data: forward, fused loss,
// backward, clipping, AdamW, one loss read (the Trainer's step).
//
//   bazel run -c opt //tools/bench:cpu_step -- [--threads=2] [--steps=8]
//       [--warmup=3] [--full] [--only=NAME] [--dropout=P]
//
// --dropout=P puts residual dropout (after each block's attention and MLP
// projections, as the GPT trains with --dropout) into the GPT shapes.
//
// Compare with tools/bench/cpu_step_torch.py (same shapes, PyTorch eager);
// tools/bench/cpu_step_compare.sh runs both alternately and prints ratios.
// Output: one line per shape, "NAME ms", then a JSON line per shape.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/base/status_macros.h"
#include "core/runtime/function_job.h"
#include "core/runtime/trainer.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/llama/llama.h"
#include "models/llama/llama_config.pb.h"
#include "models/mlp/mlp_classifier.h"
#include "models/mlp/mlp_config.pb.h"
#include "tools/bench/bench_flags.h"
#include "tools/train_main/train_main.h"

namespace weft {
namespace {

class RandomTokens : public data::Dataset {
 public:
  RandomTokens(int64_t samples, int64_t t, int64_t vocab) : n_(samples), t_(t), vocab_(vocab) {}
  int64_t num_samples() const override { return n_; }
  std::vector<data::FieldSpec> fields() const override {
    return {{"inputs", DType::kI32, {t_}}, {"targets", DType::kI32, {t_}}};
  }
  absl::Status Fill(int64_t index, absl::Span<void* const> dst) const override {
    std::mt19937 rng(static_cast<uint32_t>(index * 7919 + 17));
    std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab_ - 1));
    auto* x = static_cast<int32_t*>(dst[0]);
    auto* y = static_cast<int32_t*>(dst[1]);
    for (int64_t i = 0; i < t_; ++i) {
      x[i] = tok(rng);
      y[i] = tok(rng);
    }
    return absl::OkStatus();
  }
  std::string Describe() const override { return "random tokens"; }

 private:
  int64_t n_, t_, vocab_;
};

class RandomImages : public data::Dataset {
 public:
  RandomImages(int64_t samples, int64_t features, int classes)
      : n_(samples), f_(features), classes_(classes) {}
  int64_t num_samples() const override { return n_; }
  std::vector<data::FieldSpec> fields() const override {
    return {{"image", DType::kF32, {f_}}, {"label", DType::kI32, {}}};
  }
  absl::Status Fill(int64_t index, absl::Span<void* const> dst) const override {
    std::mt19937 rng(static_cast<uint32_t>(index * 31 + 5));
    std::normal_distribution<float> px(0.f, 1.f);
    auto* x = static_cast<float*>(dst[0]);
    for (int64_t i = 0; i < f_; ++i) x[i] = px(rng);
    *static_cast<int32_t*>(dst[1]) = static_cast<int32_t>(index % classes_);
    return absl::OkStatus();
  }
  std::string Describe() const override { return "random images"; }

 private:
  int64_t n_, f_;
  int classes_;
};

struct BenchShape {
  std::string name;
  int layers = 0, d = 0, t = 0, batch = 0;  // layers == 0: the MLP
  bool heavy = false;                        // only with --full
  bool llama = false;  // Llama blocks: heads d/64 (>= 4) over half as many K/V heads
};

std::vector<BenchShape> Shapes() {
  return {
      {"gpt_L2_d128_T64_B8", 2, 128, 64, 8},
      {"gpt_L4_d128_T64_B12", 4, 128, 64, 12},
      {"gpt_L2_d128_T256_B32", 2, 128, 256, 32},
      {"gpt_L4_d256_T128_B16", 4, 256, 128, 16},
      {"gpt_L6_d384_T64_B8", 6, 384, 64, 8},
      {"gpt_L6_d384_T256_B8", 6, 384, 256, 8, true},
      {"gpt_L2_d128_T64_B64", 2, 128, 64, 64, true},
      {"mlp_784_256_128_10_B64", 0, 0, 0, 64},
      {"llama_L2_d128_T64_B16", 2, 128, 64, 16, false, true},  // llama_debug.textproto
      {"llama_L4_d256_T256_B8", 4, 256, 256, 8, false, true},
  };
}

TrainConfig BaseTrain(const BenchShape& s, int steps, int threads) {
  TrainConfig t;
  t.set_device("cpu");
  t.set_dtype("f32");
  t.set_steps(steps);
  t.set_global_batch(s.batch);
  t.set_micro_batch(s.batch);
  if (s.layers > 0) t.set_seq_len(s.t);
  t.set_log_every(1000000);
  t.set_quiet(true);
  t.set_cpu_threads(threads);
  t.mutable_optim()->set_lr(1e-3f);
  t.mutable_optim()->set_warmup_steps(0);
  t.mutable_optim()->set_weight_decay(0.1f);
  t.mutable_optim()->set_grad_clip(1.0f);
  t.mutable_data()->set_num_workers(1);
  return t;
}

absl::StatusOr<double> RunShape(const BenchShape& s, int steps, int warmup, int threads,
                                float dropout) {
  Trainer::Options o;
  o.config = BaseTrain(s, steps, threads);
  GptConfig gpt;
  MlpConfig mlp;
  if (s.layers > 0) {
    gpt.set_n_layer(s.layers);
    gpt.set_n_head(std::max(4, s.d / 64));
    gpt.set_d_model(s.d);
    gpt.set_vocab_size(65);  // tinyshakespeare characters
    gpt.set_vocab_pad_multiple(64);
    gpt.set_max_seq_len(s.t);
    gpt.set_dropout(dropout);
    auto open_data = [&](const data::DataLoader::Options& base) -> absl::StatusOr<DataLoaders> {
      auto ds = std::make_shared<RandomTokens>(4096, s.t, 65);
      WEFT_ASSIGN_OR_RETURN(auto loader, data::DataLoader::Create(ds, base));
      return DataLoaders{std::move(loader), nullptr, 65};
    };
    auto make_model = [&](const DataLoaders&) -> absl::StatusOr<std::unique_ptr<Model>> {
      if (s.llama) {
        // Untied head, SwiGLU by Meta's rule (multiple_of 32), RoPE theta 10000.
        LlamaConfig c;
        c.set_n_layer(s.layers);
        c.set_n_head(std::max(4, s.d / 64));
        c.set_n_kv_head(std::max(4, s.d / 64) / 2);
        c.set_d_model(s.d);
        c.set_multiple_of(32);
        c.set_vocab_size(65);
        c.set_vocab_pad_multiple(64);
        c.set_max_seq_len(s.t);
        c.set_rope_theta(10000);
        WEFT_ASSIGN_OR_RETURN(auto m, Llama::Create(c, s.t));
        return std::unique_ptr<Model>(std::move(m));
      }
      WEFT_ASSIGN_OR_RETURN(auto m, Gpt::Create(gpt, s.t));
      return std::unique_ptr<Model>(std::move(m));
    };
    o.job = std::make_shared<FunctionJob>(open_data, make_model);
  } else {
    auto open_data = [&](const data::DataLoader::Options& base) -> absl::StatusOr<DataLoaders> {
      auto ds = std::make_shared<RandomImages>(4096, 784, 10);
      WEFT_ASSIGN_OR_RETURN(auto loader, data::DataLoader::Create(ds, base));
      return DataLoaders{std::move(loader), nullptr, 10};
    };
    auto make_model = [&](const DataLoaders&) -> absl::StatusOr<std::unique_ptr<Model>> {
      WEFT_ASSIGN_OR_RETURN(auto m, MlpClassifier::Create(mlp));
      return std::unique_ptr<Model>(std::move(m));
    };
    o.job = std::make_shared<FunctionJob>(open_data, make_model, "image", "label");
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(std::move(o)));
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    WEFT_ASSIGN_OR_RETURN(StepStats st, trainer->TrainStep());
    if (i >= warmup) ms.push_back(st.step_ms);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  int steps = 8, warmup = 3, threads = 2;
  float dropout = 0.f;
  bool full = false;
  std::string only;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    using weft::bench::RequireFlag;
    const std::string flag(argv[i]);
    if (absl::ConsumePrefix(&a, "--steps=")) {
      RequireFlag(absl::SimpleAtoi(a, &steps) && steps >= 1, flag.substr(2), "an integer >= 1");
    } else if (absl::ConsumePrefix(&a, "--warmup=")) {
      RequireFlag(absl::SimpleAtoi(a, &warmup) && warmup >= 0, flag.substr(2), "an integer >= 0");
    } else if (absl::ConsumePrefix(&a, "--threads=")) {
      RequireFlag(absl::SimpleAtoi(a, &threads) && threads >= 1, flag.substr(2), "an integer >= 1");
    } else if (absl::ConsumePrefix(&a, "--only=")) {
      only = std::string(a);
      std::vector<std::string> names;
      for (const weft::BenchShape& s : weft::Shapes()) names.push_back(s.name);
      RequireFlag(std::find(names.begin(), names.end(), only) != names.end(), flag.substr(2),
                  absl::StrCat("one of ", absl::StrJoin(names, ", ")));
    } else if (absl::ConsumePrefix(&a, "--dropout=")) {
      RequireFlag(absl::SimpleAtof(a, &dropout) && dropout >= 0 && dropout < 1, flag.substr(2),
                  "a probability in [0, 1)");
    } else if (a == "--full") {
      full = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (steps <= warmup) steps = warmup + 1;
  weft::GptJob unused;
  return weft::TrainMain(
      static_cast<int>(rest.size()), rest.data(),
      "CPU step time per shape.\nusage: cpu_step [--threads=2] [--steps=8] [--warmup=3] "
      "[--full] [--only=NAME] [--dropout=P]",
      &unused, [&]() -> absl::Status {
        for (const weft::BenchShape& s : weft::Shapes()) {
          if (!only.empty() ? s.name != only : (s.heavy && !full)) continue;
          WEFT_ASSIGN_OR_RETURN(double ms, weft::RunShape(s, steps, warmup, threads, dropout));
          std::printf("%-26s %9.2f ms/step\n", s.name.c_str(), ms);
          std::printf("{\"bench\":\"cpu_step\",\"impl\":\"weft\",\"shape\":\"%s\",\"threads\":%d,"
                      "\"dropout\":%g,\"step_ms_median\":%.3f}\n",
                      s.name.c_str(), threads, dropout, ms);
          std::fflush(stdout);
        }
        return absl::OkStatus();
      });
}
