// The GPT training job's policy, above the model: --strategy=auto through
// the planner, --init_from weights, the sampler, the MoE resume note and
// the run report. //models/gpt:train's main only declares the model.
#include "tools/train_main/gpt_train.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/loader.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/parallel_setup.h"
#include "core/runtime/trainer.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_job.h"
#include "models/gpt/hf_gpt2.h"
#include "models/gpt/moe_resume_note.h"
#include "models/gpt/recorded_job.h"
#include "models/gpt/train_sampler.h"
#include "models/gpt/weights_file.h"
#include "tools/estimate/planner.h"
#include "tools/report/run_report.h"
#include "tools/train_main/train_main.h"

namespace weft {
namespace {

// --strategy=auto: every rank plans the same layout from the same config
// and world size (a deterministic dry run), so they agree without talking.
absl::StatusOr<GptJob> ResolveAutoLayout(const GptJob& job) {
  WEFT_RETURN_IF_ERROR(CheckAutoFlags(job.train().parallel()));
  if (job.train().parallel().strategy() != "auto") return job;
  WEFT_ASSIGN_OR_RETURN(JobTopology topology, ResolveTopology(std::nullopt));
  std::string summary;
  WEFT_ASSIGN_OR_RETURN(GptJob planned, PlanAutoLayout(job, topology.world_size, &summary));
  if (topology.rank == 0) std::printf("%s\n", summary.c_str());
  return planned;
}

// After a resume: says when MoE routing groups changed with the layout
// (moe_resume_note.h).
void NoteMoeRoutingOnResume(const GptJob& job, const GptJob& saved, Trainer& trainer) {
  if (job.model().moe_every() <= 0) return;
  int saved_dp = 1;
  for (const ckpt::MeshAxis& a : trainer.resumed_from()->mesh()) {
    if (a.name() == "dp_replicate" || a.name() == "dp_shard") saved_dp *= a.size();
  }
  const std::string note =
      MoeRoutingResumeNote(saved, saved_dp, job, static_cast<int>(trainer.parallel().dp_size));
  if (!note.empty()) {
    trainer.logger().Print(note);
    trainer.logger().Log(MetricsLogger::Record().AddString("note", note), /*to_console=*/false);
  }
}

// The training binary's GPT job: the model's, plus the architecture check
// on --resume and the --sample_every sampler.
class GptRunJob : public GptTrainJob {
 public:
  using GptTrainJob::GptTrainJob;

  // Before the resumed tensors load: n_head and the like are in no shape,
  // and an untied lm_head would fail as a missing tensor without the flag.
  // The recorded job is kept for the MoE note after the trainer is built.
  absl::Status CheckResumed(const ckpt::Metadata& meta) override {
    absl::StatusOr<GptJob> saved = ParseRecordedGptJob(meta.job_config(), "the resumed checkpoint");
    if (!saved.ok()) return absl::OkStatus();  // another job's checkpoint: the tensors tell
    saved_ = *saved;
    return CheckSameArchitecture(
        saved->model(), job().model(),
        absl::StrCat("the resumed checkpoint (--resume=", job().train().resume(), ")"));
  }

  // --sample_every: the sampler needs the built trainer, and refuses a
  // layout it cannot sample from before the first step.
  absl::Status StartSampler(Trainer& trainer) {
    if (job().sample_every() <= 0) return absl::OkStatus();
    WEFT_ASSIGN_OR_RETURN(sampler_, TrainSampler::Create(job(), trainer));
    return absl::OkStatus();
  }

  absl::Status AfterStep(Trainer& trainer, int64_t step) override {
    return sampler_ != nullptr ? sampler_->AtStep(trainer, step) : absl::OkStatus();
  }

  // The job the resumed checkpoint recorded, when it was a GPT's.
  const std::optional<GptJob>& saved() const { return saved_; }

 private:
  std::optional<GptJob> saved_;
  std::unique_ptr<TrainSampler> sampler_;
};

}  // namespace

absl::Status RunGptTraining(const GptJob& given) {
  if (given.sample_every() < 0) {
    return InvalidArgument(absl::StrCat("--sample_every=", given.sample_every()), "a step count >= 0",
                           "0 samples no text while training");
  }
  GptJob with_model = given;
  // A Hugging Face checkpoint brings the model's shape (config.json).
  if (!given.init_from().empty() && IsHfCheckpoint(ResolveUserPath(given.init_from()))) {
    WEFT_ASSIGN_OR_RETURN(*with_model.mutable_model(),
                          ReadHfGpt2Config(ResolveUserPath(given.init_from()), given.model()));
  }
  WEFT_ASSIGN_OR_RETURN(const GptJob job, ResolveAutoLayout(with_model));
  WEFT_ASSIGN_OR_RETURN(std::string path, GptDataPath(job));
  Trainer::Options o;
  o.config = job.train();
  // `bazel run` starts in the runfiles tree: user paths are relative to
  // where the command was typed.
  ResolveCheckpointPaths(&o.config);
  report::PrepareRunReport(&o.config);
  auto run_job = std::make_shared<GptRunJob>(job, path);
  const GptRunJob& resolved = *run_job;  // with the vocabulary filled in once built
  o.job = run_job;
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(std::move(o)));
  WEFT_RETURN_IF_ERROR(run_job->StartSampler(*trainer));
  if (resolved.saved().has_value()) {
    NoteMoeRoutingOnResume(resolved.job(), *resolved.saved(), *trainer);
  }
  // --resume=auto with nothing saved yet starts from --init_from.
  const bool resumed = trainer->resumed_from() != nullptr;
  if (!job.init_from().empty() && resumed) {
    trainer->logger().Print(absl::StrCat("--init_from=", job.init_from(),
                                         " is not read: --resume continues its checkpoint"));
  }
  if (!job.init_from().empty() && !resumed) {
    const std::string from = ResolveUserPath(job.init_from());
    std::string file_tokenizer;
    bool records_model = true;
    WEFT_ASSIGN_OR_RETURN(GptWeights weights, ReadInitWeights(from, resolved.job().model(),
                                                              &file_tokenizer, &records_model));
    if (!records_model) {
      // Shapes do not show n_head: a wrong one trains on, with a wrong loss.
      trainer->logger().Print(absl::StrCat(
          "note: ", from, " records no model (no weft job_config): n_head=",
          resolved.job().model().n_head(), " and tie_weights=",
          resolved.job().model().tie_weights() ? "true" : "false",
          " come from the flags, unchecked; weft's exports and Hugging Face directories record "
          "them"));
    }
    // Token ids index the embedding: another tokenizer of the same size
    // would train on rows that mean other tokens.
    if (!file_tokenizer.empty() && !trainer->tokenizer().empty() &&
        file_tokenizer != trainer->tokenizer()) {
      return FailedPrecondition(
          absl::StrCat(from, " was trained with another tokenizer than this job's data gives"),
          "the tokenizer the weights were trained with: token ids index the embedding rows",
          "pass --tokenizer=FILE with the weights' tokenizer (//tools:ckpt export CHECKPOINT "
          "--format=tokenizer --out=FILE writes it), or data tokenized with it");
    }
    WEFT_ASSIGN_OR_RETURN(std::vector<std::string> kept, trainer->LoadWeights(weights));
    if (!kept.empty()) {
      return FailedPrecondition(absl::StrCat(from, " has no weights for ", absl::StrJoin(kept, ", ")),
                                "every parameter of the model in the file");
    }
    std::printf("initialized from %s %s\n",
                IsHfCheckpoint(from)       ? "the Hugging Face checkpoint"
                : IsSafetensorsFile(from) ? "safetensors weights"
                                          : "llm.c checkpoint",
                from.c_str());
  }
  WEFT_RETURN_IF_ERROR(trainer->Run());
  return report::FinishRunReport(trainer->config(), trainer->parallel().world_rank);
}

}  // namespace weft
