// bazel run //tools:estimate -- --config=models/gpt/configs/tiny.textproto
//     --strategy=fsdp --nproc=4 [--micro_batch=8 ...] [--rank=R]   (one line)
// bazel run //tools:estimate -- --config=... --strategy=auto --nproc=8 --memory_budget=80GiB
//
// Prints the memory one rank of a GPT job will use (parameters, gradients,
// optimizer state, activations, peak) from a dry run of the job on the meta
// device (core/runtime/memory_estimate.h): nothing is computed or allocated.
// Every training flag of //models/gpt:train applies. --strategy=auto
// estimates every data-parallel strategy and lists those that fit
// --memory_budget.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/config_loader.h"
#include "core/runtime/memory_estimate.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_job.h"
#include "tools/estimate/budget.h"
#include "tools/train_main/train_main.h"

namespace weft {
namespace {

struct ToolFlags {
  int nproc = 1;
  int rank = 0;
  int64_t budget = 0;  // 0: none given
};

struct Candidate {
  const char* label;
  const char* strategy;
  int zero_stage;
};

absl::StatusOr<ToolFlags> ParseToolFlags(const std::vector<std::string>& args) {
  ToolFlags f;
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (key == "--nproc" || key == "--rank") {
      int v = -1;
      if (!absl::SimpleAtoi(value, &v) || v < (key == "--nproc" ? 1 : 0)) {
        return InvalidArgument(a, key == "--nproc" ? "--nproc=N with N >= 1" : "--rank=R >= 0");
      }
      (key == "--nproc" ? f.nproc : f.rank) = v;
    } else if (key == "--memory_budget") {
      WEFT_ASSIGN_OR_RETURN(f.budget, ParseByteSize(value));
    }
  }
  if (f.rank >= f.nproc) {
    return InvalidArgument(absl::StrCat("--rank=", f.rank, " with --nproc=", f.nproc),
                           "0 <= rank < nproc");
  }
  return f;
}

absl::StatusOr<MemoryEstimate> Estimate(const GptJob& job, const ToolFlags& f) {
  WEFT_ASSIGN_OR_RETURN(std::string path, GptDataPath(job));
  MemoryEstimateOptions o;
  o.job.config = job.train();
  SetGptJobCallbacks(job, path, nullptr, &o.job);
  o.world_size = f.nproc;
  o.rank = f.rank;
  return EstimateMemory(std::move(o));
}

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

// --strategy=auto: every data-parallel strategy, cheapest communication first.
absl::Status EstimateAll(const GptJob& job, const ToolFlags& f) {
  const std::vector<Candidate> candidates = {{"none", "", 0},        {"ddp", "ddp", 0},
                                             {"zero-1", "zero", 1},  {"zero-2", "zero", 2},
                                             {"zero-3", "zero", 3},  {"fsdp", "fsdp", 0}};
  std::printf("%-8s %12s %12s %12s %12s %12s  %s\n", "strategy", "params", "grads", "optimizer",
              "activations", "peak", f.budget > 0 ? ("budget " + MiB(f.budget)).c_str() : "");
  std::string pick;
  for (const Candidate& c : candidates) {
    if (c.strategy[0] == '\0' && f.nproc > 1) continue;  // several ranks need a strategy
    GptJob j = job;
    j.mutable_train()->mutable_parallel()->set_strategy(c.strategy);
    if (c.zero_stage > 0) j.mutable_train()->mutable_parallel()->set_zero_stage(c.zero_stage);
    absl::StatusOr<MemoryEstimate> e = Estimate(j, f);
    if (!e.ok()) {
      std::printf("%-8s not applicable: %s\n", c.label, std::string(e.status().message()).c_str());
      continue;
    }
    const bool fits = f.budget == 0 || e->peak() <= f.budget;
    if (fits && pick.empty() && f.budget > 0) pick = c.label;
    std::printf("%-8s %12s %12s %12s %12s %12s  %s\n", c.label, MiB(e->params).c_str(),
                MiB(e->grads).c_str(), MiB(e->optimizer).c_str(), MiB(e->activations).c_str(),
                MiB(e->peak()).c_str(), f.budget == 0 ? "" : (fits ? "fits" : "too big"));
  }
  if (f.budget > 0) {
    std::printf("%s\n", pick.empty()
                            ? "nothing fits: lower --micro_batch, add ranks, or --recompute"
                            : absl::StrCat("fits with the least communication: ", pick).c_str());
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "Estimates one rank's memory for a GPT job before it runs.\n"
          "usage: estimate --config=PATH --strategy=NAME|auto --nproc=N [--rank=R]\n"
          "                [--memory_budget=80GiB] [any //models/gpt:train flag]\n");
      return 0;
    }
    if (a.rfind("--config=", 0) == 0) a = "--config=" + ResolveUserPath(a.substr(9));
    args.push_back(a);
  }
  GptJob job;
  std::vector<std::string> tool_args;
  absl::Status parsed =
      LoadConfigFromArgs(args, &job, {"nproc", "rank", "memory_budget"}, &tool_args);
  absl::StatusOr<ToolFlags> flags = ParseToolFlags(tool_args);
  if (parsed.ok() && !flags.ok()) parsed = flags.status();
  if (!parsed.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  absl::Status s;
  if (job.train().parallel().strategy() == "auto") {
    s = EstimateAll(job, *flags);
  } else {
    absl::StatusOr<MemoryEstimate> e = Estimate(job, *flags);
    s = e.status();
    if (e.ok()) std::printf("%s", FormatMemoryEstimate(*e).c_str());
    if (e.ok() && flags->budget > 0) {
      std::printf("%s the budget of %s\n", e->peak() <= flags->budget ? "fits" : "exceeds",
                  MiB(flags->budget).c_str());
    }
  }
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) { return weft::Main(argc, argv); }
