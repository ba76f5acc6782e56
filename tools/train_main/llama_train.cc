// The Llama training job's policy, above the model. //models/llama:train's
// main only declares the model.
#include "tools/train_main/llama_train.h"

#include <cstdio>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/safetensors.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/parallel_setup.h"
#include "core/runtime/trainer.h"
#include "models/llama/hf_checkpoint.h"
#include "models/llama/llama_job.h"
#include "models/lm/text_lm_job.h"
#include "tools/estimate/planner.h"
#include "tools/report/run_report.h"
#include "tools/train_main/train_main.h"

namespace weft {
namespace {

// --init_from: the parameters of a safetensors file in weft's names (a
// consolidated export's optimizer state, "<param>:<kind>", is left out).
absl::Status LoadInitWeights(const std::string& path, const LlamaConfig& model,
                             Trainer& trainer) {
  if (IsHfCheckpoint(path)) {
    WEFT_ASSIGN_OR_RETURN(auto weights, ReadHfLlamaWeights(path, model));
    WEFT_ASSIGN_OR_RETURN(std::vector<std::string> kept, trainer.LoadWeights(weights));
    if (!kept.empty()) {
      return FailedPrecondition(absl::StrCat(path, " has no weights for ", absl::StrJoin(kept, ", ")),
                                "every parameter of the model in the checkpoint");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<ckpt::SafetensorsFile> file = ckpt::ReadSafetensors(path);
  if (!file.ok()) {
    return Annotate(file.status(),
                    absl::StrCat("--init_from=", path, " (a Llama reads a Hugging Face "
                                 "checkpoint directory, or a safetensors file in weft's "
                                 "parameter names)"));
  }
  std::map<std::string, ckpt::HostTensor> weights;
  for (auto& [name, tensor] : file->tensors) {
    if (name.find(':') == std::string::npos) weights.emplace(name, std::move(tensor));
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> kept, trainer.LoadWeights(weights));
  if (!kept.empty()) {
    return FailedPrecondition(absl::StrCat(path, " has no weights for ", absl::StrJoin(kept, ", ")),
                              "every parameter of the model in the file");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunLlamaTraining(const LlamaJob& given) {
  LlamaJob job = given;
  WEFT_RETURN_IF_ERROR(CheckAutoFlags(job.train().parallel()));
  // A Hugging Face checkpoint brings the model's shape (config.json).
  const std::string init_from = job.init_from().empty() ? "" : ResolveUserPath(job.init_from());
  if (!init_from.empty() && IsHfCheckpoint(init_from)) {
    WEFT_ASSIGN_OR_RETURN(*job.mutable_model(), ReadHfLlamaConfig(init_from, job.model()));
  }
  if (job.train().parallel().strategy() == "auto") {
    // Every rank plans the same layout from the same config and world
    // size (a deterministic dry run), so they agree without talking.
    WEFT_ASSIGN_OR_RETURN(JobTopology topology, ResolveTopology(std::nullopt));
    std::string summary;
    WEFT_ASSIGN_OR_RETURN(*job.mutable_train(),
                          PlanAutoLayout(LlamaPlannerJob(job), topology.world_size, &summary));
    if (topology.rank == 0) std::printf("%s\n", summary.c_str());
  }
  WEFT_ASSIGN_OR_RETURN(std::string path, LmDataPath(job.train()));
  Trainer::Options o;
  o.config = job.train();
  // `bazel run` starts in the runfiles tree: user paths are relative to
  // where the command was typed.
  ResolveCheckpointPaths(&o.config);
  report::PrepareRunReport(&o.config);
  auto llama_job = std::make_shared<LlamaTrainJob>(job, path);
  o.job = llama_job;
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(std::move(o)));
  if (!job.init_from().empty()) {
    if (trainer->resumed_from() != nullptr) {
      trainer->logger().Print(absl::StrCat("--init_from=", job.init_from(),
                                           " is not read: --resume continues its checkpoint"));
    } else {
      WEFT_RETURN_IF_ERROR(LoadInitWeights(init_from, llama_job->job().model(), *trainer));
      std::printf("initialized from %s %s\n",
                  IsHfCheckpoint(init_from) ? "the Hugging Face checkpoint" : "safetensors weights",
                  init_from.c_str());
    }
  }
  WEFT_RETURN_IF_ERROR(trainer->Run());
  return report::FinishRunReport(trainer->config(), trainer->parallel().world_rank);
}

}  // namespace weft
