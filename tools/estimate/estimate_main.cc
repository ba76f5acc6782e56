// bazel run //tools:estimate -- --config=models/gpt/configs/tiny.textproto
//     --strategy=fsdp --nproc=4 [--micro_batch=8 ...] [--rank=R]   (one line)
// bazel run //tools:estimate -- --config=... --strategy=auto --nproc=8 --memory_budget=80GiB
//
// bazel run //tools:estimate -- --model=llama --config=models/llama/configs/llama3_8b.textproto ...
//
// Prints the memory one rank of a GPT job (or, with --model=llama, a Llama job) will use (parameters, gradients,
// optimizer state, activations, peak) from a dry run of the job on the meta
// device (core/runtime/memory_estimate.h): nothing is computed or allocated.
// Every training flag of the model's train target applies. A pipeline job
// (--pp) is estimated stage by stage (they differ) and the worst stage is
// shown, unless --rank picks one. --strategy=auto estimates every layout of
// --nproc ranks (data-parallel strategies, and pipeline, context and tensor
// parallel splits with fsdp over the rest), each at its worst rank, and
// marks those that fit --memory_budget.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/config_loader.h"
#include "core/runtime/memory_estimate.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_job.h"
#include "models/llama/llama_config.pb.h"
#include "tools/estimate/budget.h"
#include "tools/estimate/layouts.h"
#include "tools/estimate/planner.h"
#include "tools/train_main/train_main.h"

namespace weft {
namespace {

struct ToolFlags {
  int nproc = 1;
  int rank = -1;       // -1: not given (every pipeline stage, the worst shown)
  int64_t budget = 0;  // 0: none given
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
    }
  }
  if (f.rank >= f.nproc) {
    return InvalidArgument(absl::StrCat("--rank=", f.rank, " with --nproc=", f.nproc),
                           "0 <= rank < nproc");
  }
  return f;
}

// The first clause of an error, for one line of a table.
std::string Short(const absl::Status& s) {
  std::string m(s.message());
  for (const char* context : {"building the job on the meta device: ",
                              "a training step on the meta device: "}) {
    if (m.rfind(context, 0) == 0) m = m.substr(std::strlen(context));
  }
  for (const char* cut : {". Hint:", "; expected"}) {
    if (size_t at = m.find(cut); at != std::string::npos) m.resize(at);
  }
  return m.size() > 110 ? m.substr(0, 107) + "..." : m;
}

// --strategy=auto: every layout of --nproc ranks the model admits, with its
// worst rank's memory, in order of communication. Each runs the job's
// global batch, at the largest micro-batch up to the job's that splits it
// over the layout's data-parallel ranks (and feeds a pipeline at least one
// micro-batch per stage); the micro column says which. With a budget, the
// rows are what the planner tried (PlanLayouts): when nothing fits as
// given, the same layouts with recompute, then with smaller micro-batches.
absl::Status EstimateAll(const PlannerJob& job, const ToolFlags& f) {
  WEFT_RETURN_IF_ERROR(CheckAutoAxes(job.train.parallel()));
  std::printf("%-30s %12s %12s %12s %12s %12s %5s %5s  %s\n", "layout", "params", "grads",
              "optimizer", "activations", "peak", "rank", "micro",
              f.budget > 0 ? ("budget " + FormatMiB(f.budget)).c_str() : "");
  Plan plan;
  if (f.budget > 0) {
    plan = PlanLayouts(job, f.nproc, f.budget);
  } else {
    plan.tried = EstimateLayouts(job, f.nproc);
  }
  int skipped = 0;
  for (const LayoutEstimate& r : plan.tried) {
    const std::string label =
        r.recompute.empty() ? r.layout.label
                            : absl::StrCat(r.layout.label, ", recompute=", r.recompute);
    if (!r.status.ok()) {
      std::printf("%-30s not applicable: %s\n", label.c_str(), Short(r.status).c_str());
      ++skipped;
      continue;
    }
    const MemoryEstimate& e = r.worst;
    const bool fits = f.budget == 0 || e.peak() <= f.budget;
    std::printf("%-30s %12s %12s %12s %12s %12s %5d %5d  %s\n", label.c_str(),
                FormatMiB(e.params).c_str(), FormatMiB(e.grads).c_str(), FormatMiB(e.optimizer).c_str(),
                FormatMiB(e.activations).c_str(), FormatMiB(e.peak()).c_str(), e.rank, r.micro_batch,
                f.budget == 0 ? "" : (fits ? "fits" : "too big"));
  }
  std::printf("(the worst rank of each layout, global_batch=%lld at the micro-batch shown; "
              "pipelines use --pp_schedule=%s%s)\n",
              static_cast<long long>(job.train.global_batch()),
              job.train.parallel().pp_schedule().c_str(),
              skipped > 0 ? "; layouts the model does not admit are marked" : "");
  if (f.budget > 0) {
    if (!plan.pick.ok()) {
      std::printf("nothing fits: %s\n", std::string(plan.pick.status().message()).c_str());
    } else {
      std::printf("fits with the least communication%s: %s (%s)\n",
                  plan.relaxed.empty() ? "" : absl::StrCat(" after ", plan.relaxed).c_str(),
                  plan.pick->layout.label.c_str(), PickFlags(job.train, *plan.pick).c_str());
    }
  }
  return absl::OkStatus();
}

// One layout: the rank asked for, or every pipeline stage and the worst.
absl::Status EstimateOne(const PlannerJob& job, const ToolFlags& f) {
  // --rank=R: that rank; otherwise every pipeline stage (one estimate without pp).
  WEFT_ASSIGN_OR_RETURN(std::vector<MemoryEstimate> all, EstimateJob(job, f.nproc, f.rank));
  const MemoryEstimate& worst = WorstRank(all);
  if (all.size() > 1) {
    std::printf("%s", FormatStageTable(all).c_str());
    std::printf("the worst stage, rank %d:\n", worst.rank);
  }
  std::printf("%s", FormatMemoryEstimate(worst).c_str());
  int64_t limit = worst.peak();
  if (job.experts > 0) {
    // The rows an expert holds follow the data; a budget must hold the
    // bound, as --strategy=auto's does.
    WEFT_ASSIGN_OR_RETURN(std::vector<MemoryEstimate> bounded,
                          EstimateJob(job, f.nproc, f.rank, /*moe_routing_bound=*/true));
    const MemoryEstimate& b = WorstRank(bounded);
    const double factor = job.capacity_factor;
    std::printf(
        "MoE layers above route evenly (what the balance loss aims for); with every rank's rows "
        "routed to one rank's experts (%s), rank %d peaks at %s\n",
        factor > 0 ? absl::StrCat("each expert up to its capacity, factor ", factor).c_str()
                   : "all of them: --capacity_factor=0 drops none",
        b.rank, FormatMiB(b.peak()).c_str());
    limit = b.peak();
  }
  if (f.budget > 0) {
    std::printf("%s the budget of %s%s\n", limit <= f.budget ? "fits" : "exceeds",
                FormatMiB(f.budget).c_str(),
                job.experts > 0 ? " (at the routing bound)" : "");
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  std::vector<std::string> args;
  std::string model = "gpt";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "Estimates one rank's memory for a GPT or Llama job before it runs.\n"
          "usage: estimate [--model=gpt|llama] --config=PATH --strategy=NAME|auto --nproc=N\n"
          "                [--rank=R] [--memory_budget=80GiB] [any train flag of the model]\n"
          "Without --rank, a pipeline job (--pp) shows every stage and the worst.\n"
          "--strategy=auto sets --pp, --cp, --tp and the data-parallel axes itself.\n");
      return 0;
    }
    if (a.rfind("--config=", 0) == 0) a = "--config=" + ResolveUserPath(a.substr(9));
    if (a.rfind("--model=", 0) == 0) {
      model = a.substr(8);
      continue;
    }
    args.push_back(a);
  }
  // The trainer's launch flags, copied from a train command line: named,
  // with --nproc, instead of "unknown flag" and unrelated field names.
  for (const std::string& a : args) {
    for (const char* launch : {"--nproc_per_node", "--nnodes", "--node_rank", "--master_addr",
                               "--master_port"}) {
      if (a.rfind(launch, 0) == 0 && (a.size() == std::strlen(launch) ||
                                      a[std::strlen(launch)] == '=')) {
        std::fprintf(stderr,
                     "error: %s: estimate launches nothing; expected --nproc=N, the job's world "
                     "size (nodes x processes per node). Hint: drop the launch flags and add "
                     "--nproc\n",
                     a.c_str());
        return 2;
      }
    }
  }
  if (model != "gpt" && model != "llama") {
    std::fprintf(stderr, "error: --model=%s; expected gpt or llama\n", model.c_str());
    return 2;
  }
  GptJob gpt;
  LlamaJob llama;
  std::vector<std::string> tool_args;
  absl::Status parsed =
      model == "gpt" ? LoadConfigFromArgs(args, &gpt, {"nproc", "rank"}, &tool_args)
                     : LoadConfigFromArgs(args, &llama, {"nproc", "rank"}, &tool_args);
  if (!parsed.ok() && model == "gpt" && absl::StrContains(parsed.message(), "n_kv_head")) {
    parsed = Annotate(parsed, "a Llama config? pass --model=llama");
  }
  const PlannerJob job = model == "gpt" ? GptPlannerJob(gpt) : LlamaPlannerJob(llama);
  absl::StatusOr<ToolFlags> flags = ParseToolFlags(tool_args);
  if (flags.ok() && !job.train.parallel().memory_budget().empty()) {
    absl::StatusOr<int64_t> budget = ParseByteSize(job.train.parallel().memory_budget());
    if (budget.ok()) flags->budget = *budget; else flags = budget.status();
  }
  if (parsed.ok() && !flags.ok()) parsed = flags.status();
  // auto shows every layout at its worst rank; one rank of which layout?
  if (parsed.ok() && flags->rank >= 0 && job.train.parallel().strategy() == "auto") {
    parsed = InvalidArgument(absl::StrCat("--rank=", flags->rank, " with --strategy=auto"),
                             "--rank with one layout: auto lists each layout at its worst rank",
                             "pick a layout from auto's table, then pass its flags with --rank");
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  const absl::Status s = job.train.parallel().strategy() == "auto" ? EstimateAll(job, *flags)
                                                                      : EstimateOne(job, *flags);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) { return weft::Main(argc, argv); }
