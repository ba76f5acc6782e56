#include "tools/estimate/planner.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "models/gpt/gpt_job.h"
#include "tools/estimate/budget.h"

namespace weft {

absl::StatusOr<std::vector<MemoryEstimate>> EstimateJob(const GptJob& job, int nproc, int rank) {
  WEFT_ASSIGN_OR_RETURN(std::string path, GptDataPath(job));
  MemoryEstimateOptions o;
  o.job.config = job.train();
  SetGptJobCallbacks(job, path, nullptr, &o.job);
  o.world_size = nproc;
  o.rank = std::max(rank, 0);
  if (rank < 0) return EstimatePipelineStages(o);
  WEFT_ASSIGN_OR_RETURN(MemoryEstimate e, EstimateMemory(std::move(o)));
  return std::vector<MemoryEstimate>{e};
}

std::vector<LayoutEstimate> EstimateLayouts(const GptJob& job, int nproc) {
  const int64_t global = job.train().global_batch();
  const int micro = static_cast<int>(job.train().micro_batch());
  std::vector<LayoutEstimate> out;
  for (const Layout& l : CandidateLayouts(nproc)) {
    LayoutEstimate row{.layout = l};
    const int dp = DataParallelRanks(l, nproc);
    row.micro_batch = FitMicroBatch(global, micro, dp, l.pp);
    if (row.micro_batch == 0) {
      row.status = InvalidArgument(
          absl::StrCat("global_batch=", global, " does not split into micro-batches for ", dp,
                       " data-parallel rank(s)",
                       l.pp > 1 ? absl::StrCat(" x ", l.pp, " pipeline stages") : ""),
          "a global batch of at least one micro-batch per rank and stage");
    } else {
      absl::StatusOr<std::vector<MemoryEstimate>> all =
          EstimateJob(WithLayout(job, row), nproc, -1);
      if (all.ok()) {
        row.worst = WorstRank(*all);
      } else {
        row.status = all.status();
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

absl::StatusOr<LayoutEstimate> PickLayout(const std::vector<LayoutEstimate>& estimates,
                                          int64_t budget) {
  const LayoutEstimate* smallest = nullptr;
  for (const LayoutEstimate& e : estimates) {
    if (!e.status.ok()) continue;
    if (e.worst.peak() <= budget) return e;
    if (smallest == nullptr || e.worst.peak() < smallest->worst.peak()) smallest = &e;
  }
  if (smallest == nullptr) {
    return FailedPrecondition("no layout of these ranks admits the job",
                              "a model, batch and rank count some layout accepts",
                              "run //tools:estimate with --strategy=auto to see each reason");
  }
  return MakeError(absl::StatusCode::kResourceExhausted,
                   absl::StrCat("no layout fits the memory budget of ", FormatMiB(budget),
                                " per rank; the smallest is ", smallest->layout.label, " at ",
                                FormatMiB(smallest->worst.peak()), " (rank ", smallest->worst.rank, ")"),
                   "a layout whose worst rank's peak fits the budget",
                   "raise --memory_budget, add ranks, lower --micro_batch or add --recompute");
}

GptJob WithLayout(const GptJob& job, const LayoutEstimate& pick) {
  GptJob j = job;
  ApplyLayout(pick.layout, j.mutable_train()->mutable_parallel());
  j.mutable_train()->set_micro_batch(pick.micro_batch);
  return j;
}

absl::StatusOr<GptJob> PlanAutoLayout(const GptJob& job, int nproc, std::string* summary) {
  const std::string& given = job.train().parallel().memory_budget();
  if (given.empty()) {
    return InvalidArgument(
        "--strategy=auto without --memory_budget",
        "a per-rank memory budget to plan against, e.g. --memory_budget=70GiB",
        "auto trains the layout with the least communication that fits it; "
        "bazel run //tools:estimate -- <same flags> --nproc=N lists every layout");
  }
  WEFT_ASSIGN_OR_RETURN(int64_t budget, ParseByteSize(given));
  absl::StatusOr<LayoutEstimate> pick = PickLayout(EstimateLayouts(job, nproc), budget);
  if (!pick.ok()) return Annotate(pick.status(), absl::StrCat("--strategy=auto on ", nproc, " ranks"));
  *summary = absl::StrCat("--strategy=auto on ", nproc, " ranks: ", pick->layout.label, " (",
                          LayoutFlags(pick->layout, pick->micro_batch), "), worst rank ",
                          pick->worst.rank, " peaks at ", FormatMiB(pick->worst.peak()), " of the ",
                          FormatMiB(budget), " budget");
  return WithLayout(job, *pick);
}

}  // namespace weft
