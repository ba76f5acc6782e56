#include "strategies/pp/pp.h"

#include <cstdio>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "strategies/pp/pipeline_model.h"
#include "strategies/pp/pipeline_schedule.h"
#include "strategies/pp/stage_split.h"
#include "strategies/pp/stage_timing.h"

namespace weft {
namespace {

using pp::ChunkRange;

// The pipeline's part in each step: tied copies' gradients, the gradient
// norm over the pp ranks.
class PipelineParticipant : public StepParticipant {
 public:
  PipelineParticipant(std::set<const Parameter*> tied, std::shared_ptr<comm::ProcessGroup> tie_group,
                      comm::ProcessGroup* pp_group, NativeStream stream,
                      std::shared_ptr<const pp::PipelineStepSchedule> schedule)
      : tied_(std::move(tied)),
        tie_group_(std::move(tie_group)),
        pp_group_(pp_group),
        stream_(stream),
        schedule_(std::move(schedule)) {}

  void AppendStepMetrics(std::vector<std::pair<std::string, double>>* out) override {
    const pp::PipelineStepSchedule::Peaks p = schedule_->TakePeaks();
    out->emplace_back("pp_in_flight", p.in_flight);
    out->emplace_back("pp_activation_mb", static_cast<double>(p.activation_bytes) / (1 << 20));
  }

  absl::Status AfterAllGradients(const std::vector<OptimTarget>& targets) override {
    if (tie_group_ == nullptr) return absl::OkStatus();
    for (const OptimTarget& t : targets) {
      if (t.param == nullptr || !tied_.count(t.param)) continue;
      Tensor g = t.grad;
      WEFT_RETURN_IF_ERROR(Annotate(
          tie_group_->AllReduce(g, {.op = comm::ReduceOp::kSum, .stream = stream_})->Wait(),
          absl::StrCat("pp: summing the gradients of the tied ", t.param->name())));
    }
    return absl::OkStatus();
  }

  absl::Status ReduceGradNormSq(Tensor& norm_sq) override {
    return Annotate(pp_group_->AllReduce(norm_sq, {.op = comm::ReduceOp::kSum, .stream = stream_})
                        ->Wait(),
                    "pp gradient norm");
  }

 private:
  std::set<const Parameter*> tied_;
  std::shared_ptr<comm::ProcessGroup> tie_group_;  // null on ranks without tied weights
  comm::ProcessGroup* pp_group_;
  NativeStream stream_;
  std::shared_ptr<const pp::PipelineStepSchedule> schedule_;
};

// Every rank times the stages; rank 0's times decide, so that all
// pipelines and their data-parallel replicas cut the model alike.
absl::StatusOr<std::vector<double>> MeasuredCosts(Model& model, const std::vector<Stage>& stages,
                                                  const RunContext& run, comm::DeviceMesh& mesh) {
  WEFT_ASSIGN_OR_RETURN(std::vector<double> ms, pp::MeasureStageMs(model, stages, run));
  std::vector<float> f(ms.begin(), ms.end());
  WEFT_ASSIGN_OR_RETURN(Tensor host,
                        Tensor::FromVector<float>(f, {static_cast<int64_t>(f.size())}));
  // On the job's device: NCCL groups take device tensors only.
  WEFT_ASSIGN_OR_RETURN(Tensor t, host.To(run.device, run.stream));
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> world, mesh.WorldGroup());
  WEFT_RETURN_IF_ERROR(Annotate(world->Broadcast(t, {.root = 0, .stream = run.stream})->Wait(),
                                "pp: sharing rank 0's stage times"));
  WEFT_ASSIGN_OR_RETURN(f, t.ToFloats());
  return std::vector<double>(f.begin(), f.end());
}

}  // namespace

OptionSchema PipelineStrategy::Options() const {
  OptionSchema s;
  s.Enum("pp_schedule", "1f1b", pp::PipelineScheduleNames(),
         "gpipe: all forwards then all backwards; 1f1b; interleaved (with pp_virtual_stages > 1); "
         "zbh1: zero-bubble H1");
  s.Int("pp_virtual_stages", 1, "model chunks per pipeline rank (interleaved schedule)");
  s.Enum("pp_split", "params", {"layers", "params", "time"},
         "how stages are split over the chunks: equal stage counts, balanced parameter counts, "
         "or balanced forward+backward times measured on one probe sample before training");
  return s;
}

absl::Status PipelineStrategy::Validate(const StrategyOptionSet& options,
                                        const comm::MeshLayout* mesh) const {
  if (mesh == nullptr) {
    return InvalidArgument("--strategy=pp in a single process", "--pp=N > 1 pipeline ranks",
                           "launch with --nproc_per_node and --pp");
  }
  const std::string& schedule = options.GetEnum("pp_schedule");
  const int64_t v = options.GetInt("pp_virtual_stages");
  WEFT_ASSIGN_OR_RETURN(int pp, mesh->AxisSize("pp"));
  if (v < 1 || (v > 1) != (schedule == "interleaved")) {
    return InvalidArgument(absl::StrCat("--pp_schedule=", schedule, " with --pp_virtual_stages=", v),
                           "pp_virtual_stages > 1 exactly with the interleaved schedule");
  }
  if (v > 1 && pp % 2 != 0) {
    return InvalidArgument(absl::StrCat("interleaved pipelining over --pp=", pp, " ranks"),
                           "an even number of pipeline ranks",
                           "the ring of links needs alternating communicators");
  }
  // zbh1 with data parallelism: ddp and zero-1 reduce in the gradients-
  // ready hooks that W runs; zero-2/3 and fsdp are refused when the step
  // schedule meets them (PipelineStepSchedule::Run).
  return absl::OkStatus();
}

absl::StatusOr<StrategyResult> PipelineStrategy::Apply(StrategyContext& ctx) {
  StrategyResult result;
  Model& model = ctx.model();
  std::vector<Stage> stages = model.Stages();
  if (stages.empty()) {
    return FailedPrecondition(absl::StrCat(model.Summary(), " does not list its stages"),
                              "a model with Model::Stages() (e.g. the GPT)");
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<pp::PipeLinks> links, pp::PipeLinks::Create(*ctx.mesh));
  const int p = links->size(), rank = links->rank();
  const int v = static_cast<int>(ctx.options->GetInt("pp_virtual_stages"));
  const int parts = p * v;
  std::vector<std::string> names;
  std::vector<double> costs;
  for (const Stage& s : stages) {
    names.push_back(s.name);
    double n = 0;
    for (Parameter* q : s.Parameters()) n += static_cast<double>(q->global_numel());
    costs.push_back(n);
  }
  const std::string& split = ctx.options->GetEnum("pp_split");
  if (split == "time" && ctx.run->device.is_meta()) {
    // Where a real run would cut depends on times it measures then.
    return FailedPrecondition("--pp_split=time in a dry run on the meta device",
                              "a split known before running: --pp_split=params or layers",
                              "a memory estimate cannot time the stages; estimate with "
                              "--pp_split=params (the default) or layers");
  }
  if (split == "time") {
    WEFT_ASSIGN_OR_RETURN(costs, MeasuredCosts(model, stages, *ctx.run, *ctx.mesh));
  }
  std::vector<int> bounds;
  if (split == "layers") {
    WEFT_ASSIGN_OR_RETURN(bounds, pp::SplitByCount(static_cast<int>(stages.size()), parts));
  } else {
    WEFT_ASSIGN_OR_RETURN(bounds, pp::SplitByCost(costs, parts));
  }
  if (ctx.mesh->rank() == 0 && !ctx.run->device.is_meta()) {  // not in dry runs (estimates)
    const char* unit = split == "time" ? ", cost = probe ms" : split == "params" ? ", cost = parameters" : "";
    std::printf("pp split (%s by %s%s): %s\n", ctx.options->GetEnum("pp_schedule").c_str(),
                split.c_str(), unit, pp::DescribeSplit(names, costs, bounds).c_str());
  }
  // Virtual stage c * p + r is chunk c of rank r.
  std::vector<ChunkRange> chunks;
  std::vector<int> rank_of_stage(stages.size());
  for (int vs = 0; vs < parts; ++vs) {
    for (int s = bounds[vs]; s < bounds[vs + 1]; ++s) rank_of_stage[s] = vs % p;
    if (vs % p == rank) chunks.push_back({bounds[vs], bounds[vs + 1]});
  }
  // Which ranks read each parameter; this rank holds what it reads.
  std::map<Parameter*, std::set<int>> readers;
  for (size_t s = 0; s < stages.size(); ++s) {
    for (Parameter* q : stages[s].Parameters()) readers[q].insert(rank_of_stage[s]);
  }
  std::set<const Parameter*> tied;
  for (auto& [q, rs] : readers) {
    q->set_held(rs.count(rank) > 0);
    if (!q->held()) {
      q->value = Tensor();  // another rank's: free it
      q->grad = Tensor();
      continue;
    }
    if (rs.size() > 1) {
      if (rs.size() > 2) {
        return FailedPrecondition(absl::StrCat(q->name(), " is read on ", rs.size(), " pipeline ranks"),
                                  "a weight shared by at most two ranks (tied embedding and head)");
      }
      tied.insert(q);
      q->set_copy_index(rank == *rs.begin() ? 0 : 1);
    }
  }
  // The pair of ranks sharing tied weights gets its own group.
  std::shared_ptr<comm::ProcessGroup> tie_group;
  std::set<int> tie_ranks;
  for (auto& [q, rs] : readers) {
    if (rs.size() == 2) tie_ranks.insert(rs.begin(), rs.end());
  }
  if (tie_ranks.size() == 2 && tie_ranks.count(rank)) {
    WEFT_ASSIGN_OR_RETURN(std::vector<int> pp_ranks, ctx.mesh->GroupRanks("pp"));
    std::vector<int> pair;
    for (int r : tie_ranks) pair.push_back(pp_ranks[r]);
    WEFT_ASSIGN_OR_RETURN(tie_group, ctx.mesh->NewGroup(pair, "pp_tied"));
  }
  comm::ProcessGroup* pp_group = &links->group();
  auto pipeline = std::make_unique<pp::PipelineModel>(std::move(*ctx.model_slot), std::move(stages),
                                                      std::move(chunks), parts, std::move(links),
                                                      ctx.applied->stage_boundary);
  pp::PipelineModel* raw = pipeline.get();
  *ctx.model_slot = std::move(pipeline);
  auto schedule =
      std::make_shared<pp::PipelineStepSchedule>(raw, ctx.options->GetEnum("pp_schedule"));
  result.step_schedule = schedule;
  result.participants.push_back(std::make_unique<PipelineParticipant>(
      std::move(tied), std::move(tie_group), pp_group, ctx.run->stream, schedule));
  // Losses come from the last rank only: sums for logging span the pp ranks
  // (the mesh's cached pp group, the one the links use).
  WEFT_ASSIGN_OR_RETURN(result.loss_group, ctx.mesh->Group("pp"));
  return result;
}

}  // namespace weft
