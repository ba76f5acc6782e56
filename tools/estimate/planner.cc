#include "tools/estimate/planner.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "models/gpt/gpt_job.h"
#include "models/llama/llama_job.h"
#include "models/lm/text_lm_job.h"
#include "tools/estimate/budget.h"

namespace weft {

PlannerJob GptPlannerJob(const GptJob& job) {
  return {.train = job.train(),
          .experts = job.model().moe_every() > 0 ? job.model().num_experts() : 0,
          .capacity_factor = job.model().capacity_factor(),
          .make_job = [job](const TrainConfig& train, std::shared_ptr<data::TextSourceCache> cache)
              -> absl::StatusOr<std::shared_ptr<TrainJob>> {
            GptJob j = job;
            *j.mutable_train() = train;
            WEFT_ASSIGN_OR_RETURN(std::string path, GptDataPath(j));
            return std::make_shared<GptTrainJob>(j, path, std::move(cache));
          }};
}

PlannerJob LlamaPlannerJob(const LlamaJob& job) {
  return {.train = job.train(),
          .make_job = [job](const TrainConfig& train, std::shared_ptr<data::TextSourceCache> cache)
              -> absl::StatusOr<std::shared_ptr<TrainJob>> {
            LlamaJob j = job;
            *j.mutable_train() = train;
            WEFT_ASSIGN_OR_RETURN(std::string path, LmDataPath(train));
            return std::make_shared<LlamaTrainJob>(j, path, std::move(cache));
          }};
}

namespace {

// The row of `layout` at micro-batch m (0: none splits the global batch).
LayoutEstimate EstimateAt(const PlannerJob& job, int nproc, const Layout& layout, int m,
                          const std::string& recompute,
                          const std::shared_ptr<data::TextSourceCache>& text_cache) {
  LayoutEstimate row{.layout = layout, .micro_batch = m, .recompute = recompute};
  if (m == 0) {
    const int dp = DataParallelRanks(layout, nproc);
    row.status = InvalidArgument(
        absl::StrCat("global_batch=", job.train.global_batch(),
                     " does not split into micro-batches for ", dp, " data-parallel rank(s)",
                     layout.pp > 1 ? absl::StrCat(" x ", layout.pp, " pipeline stages") : ""),
        "a global batch of at least one micro-batch per rank and stage");
    return row;
  }
  // A budget is a limit: MoE layers at their routing bound, not balanced.
  PlannerJob laid_out = job;
  laid_out.train = WithLayout(job.train, row);
  absl::StatusOr<std::vector<MemoryEstimate>> all =
      EstimateJob(laid_out, nproc, -1, /*moe_routing_bound=*/true, text_cache);
  if (all.ok()) {
    row.worst = WorstRank(*all);
  } else {
    row.status = all.status();
  }
  return row;
}

bool Fits(const LayoutEstimate& e, int64_t budget) {
  return e.status.ok() && e.worst.peak() <= budget;
}

// Step 4: each layout at the largest micro-batch below its first estimate's
// that keeps the global batch and fits; a layout where none fits keeps its
// smallest, for the error. Stops at the first layout that fits.
std::vector<LayoutEstimate> SmallerMicroBatches(const PlannerJob& job, int nproc, int64_t budget,
                                                const std::vector<LayoutEstimate>& first,
                                                const std::string& recompute,
                                                const std::shared_ptr<data::TextSourceCache>& text_cache) {
  const int64_t global = job.train.global_batch();
  std::vector<LayoutEstimate> out;
  for (const LayoutEstimate& f : first) {
    if (f.micro_batch <= 1) continue;  // nothing smaller, or not admitted at all
    const int dp = DataParallelRanks(f.layout, nproc);
    std::optional<LayoutEstimate> last;
    for (int m = f.micro_batch - 1; m >= 1; --m) {
      if (FitMicroBatch(global, m, dp, f.layout.pp) != m) continue;
      last = EstimateAt(job, nproc, f.layout, m, recompute, text_cache);
      if (!last->status.ok() || Fits(*last, budget)) break;
    }
    if (!last) continue;
    out.push_back(*last);
    if (Fits(*last, budget)) break;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<MemoryEstimate>> EstimateJob(
    const GptJob& job, int nproc, int rank, bool moe_routing_bound,
    std::shared_ptr<data::TextSourceCache> text_cache) {
  return EstimateJob(GptPlannerJob(job), nproc, rank, moe_routing_bound, std::move(text_cache));
}

absl::StatusOr<std::vector<MemoryEstimate>> EstimateJob(
    const PlannerJob& job, int nproc, int rank, bool moe_routing_bound,
    std::shared_ptr<data::TextSourceCache> text_cache) {
  MemoryEstimateOptions o;
  o.moe_routing_bound = moe_routing_bound;
  o.trainer.config = job.train;
  // Each pipeline stage is a dry run of its own: one tokenization for all.
  if (text_cache == nullptr) text_cache = data::MakeTextSourceCache();
  WEFT_ASSIGN_OR_RETURN(o.trainer.job, job.make_job(job.train, std::move(text_cache)));
  o.world_size = nproc;
  o.rank = std::max(rank, 0);
  if (rank < 0) return EstimatePipelineStages(o);
  WEFT_ASSIGN_OR_RETURN(MemoryEstimate e, EstimateMemory(std::move(o)));
  return std::vector<MemoryEstimate>{e};
}

std::vector<LayoutEstimate> EstimateLayouts(const GptJob& job, int nproc,
                                            const std::string& recompute,
                                            std::shared_ptr<data::TextSourceCache> text_cache) {
  return EstimateLayouts(GptPlannerJob(job), nproc, recompute, std::move(text_cache));
}

std::vector<LayoutEstimate> EstimateLayouts(const PlannerJob& job, int nproc,
                                            const std::string& recompute,
                                            std::shared_ptr<data::TextSourceCache> text_cache) {
  // Every layout (and pipeline stage) opens the job's data: tokenizing a
  // 20 MB text once per dry run made a planning of 4 ranks take minutes.
  if (text_cache == nullptr) text_cache = data::MakeTextSourceCache();
  const int64_t global = job.train.global_batch();
  const int micro = static_cast<int>(job.train.micro_batch());
  std::vector<LayoutEstimate> out;
  for (const Layout& l : CandidateLayouts(nproc, job.experts)) {
    const int m = FitMicroBatch(global, micro, DataParallelRanks(l, nproc), l.pp);
    out.push_back(EstimateAt(job, nproc, l, m, recompute, text_cache));
  }
  return out;
}

absl::StatusOr<LayoutEstimate> PickLayout(const std::vector<LayoutEstimate>& estimates,
                                          int64_t budget, const std::string& hint) {
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
                                " per rank; the smallest is ", smallest->layout.label,
                                smallest->recompute.empty()
                                    ? ""
                                    : absl::StrCat(" with ", smallest->recompute, " recompute"),
                                " at micro-batch ", smallest->micro_batch, ", ",
                                FormatMiB(smallest->worst.peak()), " (rank ", smallest->worst.rank,
                                ")"),
                   "a layout whose worst rank's peak fits the budget",
                   hint.empty() ? "raise --memory_budget, add ranks, lower --micro_batch or add "
                                  "--recompute"
                                : hint);
}

Plan PlanLayouts(const GptJob& job, int nproc, int64_t budget) {
  return PlanLayouts(GptPlannerJob(job), nproc, budget);
}

Plan PlanLayouts(const PlannerJob& job, int nproc, int64_t budget) {
  Plan plan;
  const bool own_recompute = job.train.recompute();
  struct Step {
    std::string recompute;
    const char* relaxed;
  };
  std::vector<Step> steps = {{"", ""}};
  if (!own_recompute) {
    steps.push_back({"attention", "selective (attention) recompute"});
    steps.push_back({"full", "full recompute"});
  }
  std::vector<LayoutEstimate> first;
  const std::shared_ptr<data::TextSourceCache> text_cache = data::MakeTextSourceCache();
  for (const Step& s : steps) {
    std::vector<LayoutEstimate> rows = EstimateLayouts(job, nproc, s.recompute, text_cache);
    plan.tried.insert(plan.tried.end(), rows.begin(), rows.end());
    if (first.empty()) first = rows;
    absl::StatusOr<LayoutEstimate> pick = PickLayout(rows, budget);
    if (pick.ok()) {
      plan.pick = std::move(pick);
      plan.relaxed = s.relaxed;
      return plan;
    }
  }
  const std::string recompute = own_recompute ? "" : "full";
  std::vector<LayoutEstimate> rows =
      SmallerMicroBatches(job, nproc, budget, first, recompute, text_cache);
  plan.tried.insert(plan.tried.end(), rows.begin(), rows.end());
  absl::StatusOr<LayoutEstimate> pick = PickLayout(rows, budget);
  if (pick.ok()) {
    plan.pick = std::move(pick);
    plan.relaxed = absl::StrCat(own_recompute ? "" : "full recompute and ", "micro-batch ",
                                pick->micro_batch, " (from the largest that keeps the global batch)");
    return plan;
  }
  plan.pick = PickLayout(plan.tried, budget,
                         "raise --memory_budget or add ranks: every layout was also tried with "
                         "recompute and with smaller micro-batches");
  return plan;
}

namespace {

// eval_samples for `pick`: evaluation counted in samples stays the same set
// when the planner changes the micro-batch (eval_batches counts micro-batches).
int64_t EvalSamplesKept(const TrainConfig& t, const LayoutEstimate& pick) {
  if (t.eval_samples() > 0 || pick.micro_batch == t.micro_batch()) return t.eval_samples();
  return t.eval_batches() * t.micro_batch();
}

}  // namespace

TrainConfig WithLayout(const TrainConfig& train, const LayoutEstimate& pick) {
  TrainConfig t = train;
  ApplyLayout(pick.layout, t.mutable_parallel());
  // The validation set stays the one the job's micro-batch made.
  t.set_eval_samples(EvalSamplesKept(train, pick));
  t.set_micro_batch(pick.micro_batch);
  if (!pick.recompute.empty()) {
    t.set_recompute(true);
    ParallelConfig* p = t.mutable_parallel();
    const std::string policy = absl::StrCat("recompute_policy=", pick.recompute);
    p->set_strategy_options(p->strategy_options().empty()
                                ? policy
                                : absl::StrCat(p->strategy_options(), ",", policy));
  }
  return t;
}

GptJob WithLayout(const GptJob& job, const LayoutEstimate& pick) {
  GptJob j = job;
  *j.mutable_train() = WithLayout(job.train(), pick);
  return j;
}

std::string PickFlags(const TrainConfig& train, const LayoutEstimate& pick) {
  std::string flags = LayoutFlags(pick.layout, pick.micro_batch);
  const int64_t eval_samples = EvalSamplesKept(train, pick);
  if (eval_samples != train.eval_samples()) {
    absl::StrAppend(&flags, " --eval_samples=", eval_samples);
  }
  if (!pick.recompute.empty()) {
    absl::StrAppend(&flags, " --recompute --strategy_options=",
                    WithLayout(train, pick).parallel().strategy_options());
  }
  return flags;
}

std::string PickFlags(const GptJob& job, const LayoutEstimate& pick) {
  return PickFlags(job.train(), pick);
}

// auto plans every strategy and axis, so it stands alone; --memory_budget
// only feeds that plan, so without auto it is refused rather than ignored.
absl::Status CheckAutoFlags(const ParallelConfig& p) {
  std::vector<std::string> names;
  for (absl::string_view n : absl::StrSplit(p.strategy(), ',')) {
    names.emplace_back(absl::StripAsciiWhitespace(n));
  }
  const bool has_auto = std::find(names.begin(), names.end(), "auto") != names.end();
  if (has_auto && names.size() > 1) {
    return InvalidArgument(
        absl::StrCat("--strategy=", p.strategy(), ": auto combined with other strategies"),
        "--strategy=auto alone (it picks the strategies and axes itself), or a list without auto",
        "keep only auto (with --memory_budget=B), or drop it and choose the strategies yourself; "
        "//tools:estimate shows what auto would pick");
  }
  if (!has_auto && !p.memory_budget().empty()) {
    return InvalidArgument(
        absl::StrCat("--memory_budget=", p.memory_budget(), " without --strategy=auto"),
        "--memory_budget only with --strategy=auto, whose planner picks a layout that fits it",
        "add --strategy=auto, or drop --memory_budget; to check a layout against a budget use "
        "bazel run //tools:estimate -- <same flags> --memory_budget=B");
  }
  return absl::OkStatus();
}

absl::Status CheckAutoAxes(const ParallelConfig& p) {
  // The pick replaced them without a word: --tp=2 trained zero-1.
  std::vector<std::string> set;
  for (const auto& [name, value, unset] :
       {std::tuple{"pp", p.pp(), 1}, {"cp", p.cp(), 1}, {"tp", p.tp(), 1}, {"ep", p.ep(), 1},
        {"dp_replicate", p.dp_replicate(), 1}, {"dp_shard", p.dp_shard(), 0}}) {
    if (value != unset) set.push_back(absl::StrCat("--", name, "=", value));
  }
  if (set.empty()) return absl::OkStatus();
  return InvalidArgument(
      absl::StrCat("--strategy=auto with ", absl::StrJoin(set, " ")),
      "no mesh axes with auto: it sets --pp, --cp, --tp, --ep and the data-parallel axes itself",
      "drop them to let auto choose; to keep them, name the strategies yourself "
      "(//tools:estimate with the same flags and --memory_budget=B checks that layout)");
}

absl::StatusOr<GptJob> PlanAutoLayout(const GptJob& job, int nproc, std::string* summary) {
  WEFT_ASSIGN_OR_RETURN(TrainConfig train, PlanAutoLayout(GptPlannerJob(job), nproc, summary));
  GptJob j = job;
  *j.mutable_train() = std::move(train);
  return j;
}

absl::StatusOr<TrainConfig> PlanAutoLayout(const PlannerJob& job, int nproc,
                                           std::string* summary) {
  WEFT_RETURN_IF_ERROR(CheckAutoAxes(job.train.parallel()));
  const std::string& given = job.train.parallel().memory_budget();
  if (given.empty()) {
    return InvalidArgument(
        "--strategy=auto without --memory_budget",
        "a per-rank memory budget to plan against, e.g. --memory_budget=70GiB",
        "auto trains the layout with the least communication that fits it; "
        "bazel run //tools:estimate -- <same flags> --nproc=N lists every layout");
  }
  WEFT_ASSIGN_OR_RETURN(int64_t budget, ParseByteSize(given));
  Plan plan = PlanLayouts(job, nproc, budget);
  const std::string on = absl::StrCat("--strategy=auto on ", nproc, nproc == 1 ? " rank" : " ranks");
  if (!plan.pick.ok()) return Annotate(plan.pick.status(), on);
  const LayoutEstimate& pick = *plan.pick;
  *summary = absl::StrCat(
      on, ": ", pick.layout.label, " (", PickFlags(job.train, pick),
      "), worst rank ", pick.worst.rank, " peaks at ", FormatMiB(pick.worst.peak()), " of the ",
      FormatMiB(budget), " budget",
      plan.relaxed.empty() ? "" : absl::StrCat("; no layout fits without ", plan.relaxed));
  return WithLayout(job.train, pick);
}

}  // namespace weft
