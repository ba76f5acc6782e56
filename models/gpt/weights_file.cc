#include "models/gpt/weights_file.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/safetensors.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "models/gpt/llmc_format.h"
#include "models/gpt/hf_gpt2.h"
#include "models/gpt/recorded_job.h"

namespace weft {
namespace {

struct SafetensorsWeights {
  GptWeights weights;
  std::optional<GptJob> job;  // what the file records, if anything
  std::string tokenizer;
};

absl::StatusOr<SafetensorsWeights> ReadSafetensorsWeights(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(ckpt::SafetensorsFile file, ckpt::ReadSafetensors(path));
  SafetensorsWeights out;
  for (auto& [name, tensor] : file.tensors) {
    // Optimizer state in a consolidated file: "<param>:exp_avg" and the like.
    if (name.find(':') == std::string::npos) out.weights.emplace(name, std::move(tensor));
  }
  if (out.weights.empty()) {
    return FailedPrecondition(absl::StrCat(path, " holds no parameters"),
                              "a model's weights by parameter name",
                              "write it with //tools:ckpt export --format=safetensors");
  }
  const auto job = file.metadata.find("job_config");
  if (job != file.metadata.end()) {
    WEFT_ASSIGN_OR_RETURN(out.job, ParseRecordedGptJob(job->second, path));
  }
  const auto tok = file.metadata.find("tokenizer");
  if (tok != file.metadata.end()) out.tokenizer = tok->second;
  return out;
}

// A directory is most likely a weft checkpoint given where a weights file
// goes; read as llm.c's it failed as "shorter than the header ... truncated".
absl::Status CheckNotDirectory(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return absl::OkStatus();
  return FailedPrecondition(
      absl::StrCat("'", path, "' is a directory (a weft checkpoint?), not a weights file"),
      "an llm.c model file or a .safetensors file",
      absl::StrCat("write one with: bazel run //tools:ckpt -- export ", path,
                   " --format=safetensors --out=FILE; or continue the run with "
                   "--resume=DIR, or sample it with --checkpoint=DIR"));
}

// A GPT2LMHeadModel's model.safetensors given alone: its names are HF's,
// and n_head and the rest are in the config.json beside it.
absl::Status CheckNotBareHfFile(const std::string& path, const SafetensorsWeights& file) {
  if (file.job || (file.weights.count("transformer.wte.weight") == 0 &&
                   file.weights.count("wte.weight") == 0)) {
    return absl::OkStatus();
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return InvalidArgument(
      absl::StrCat(path, " holds a Hugging Face GPT-2's tensors (transformer.wte.weight, ...)"),
      "a Hugging Face checkpoint given as its directory: the model's shape is in the "
      "config.json beside the weights",
      absl::StrCat("--init_from=", dir.empty() ? "." : dir));
}

}  // namespace

bool IsSafetensorsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[9] = {};
  return in.read(head, sizeof(head)) && head[8] == '{';
}

absl::Status CheckSameArchitecture(const GptConfig& recorded, const GptConfig& model,
                                   const std::string& what) {
  std::vector<std::string> diffs, flags;
  auto expect_equal = [&](const char* field, int64_t then, int64_t now) {
    if (then == now) return;
    diffs.push_back(absl::StrCat(field, " ", then, " in ", what, " vs ", now, " in the model"));
    flags.push_back(absl::StrCat("--model.", field, "=", then));
  };
  expect_equal("n_head", recorded.n_head(), model.n_head());
  // 0 is "the data's": known in a resolved job, which checkpoints record.
  // The vocabulary comes from the tokenizer, so that is what to pass.
  if (recorded.vocab_size() > 0 && model.vocab_size() > 0 &&
      recorded.vocab_size() != model.vocab_size()) {
    diffs.push_back(absl::StrCat("vocab_size ", recorded.vocab_size(), " in ", what, " vs ",
                                 model.vocab_size(), " in the model"));
    flags.push_back(
        "--tokenizer=FILE with the weights' tokenizer (//tools:ckpt export CHECKPOINT "
        "--format=tokenizer writes it)");
  }
  if (recorded.moe_every() > 0 && model.moe_every() > 0) {
    expect_equal("top_k", recorded.top_k(), model.top_k());
  }
  if (recorded.tie_weights() != model.tie_weights()) {
    auto name = [](bool b) { return b ? "true" : "false"; };
    diffs.push_back(absl::StrCat("tie_weights ", name(recorded.tie_weights()), " in ", what,
                                 " vs ", name(model.tie_weights()), " in the model"));
    flags.push_back(absl::StrCat("--model.tie_weights=", name(recorded.tie_weights())));
  }
  if (diffs.empty()) return absl::OkStatus();
  return FailedPrecondition(
      absl::StrCat(what, " was trained as another model: ", absl::StrJoin(diffs, "; ")),
      "the model it records", absl::StrCat("pass ", absl::StrJoin(flags, " ")));
}

absl::StatusOr<GptWeights> ReadInitWeights(const std::string& path, const GptConfig& model,
                                           std::string* tokenizer, bool* records_model) {
  if (tokenizer != nullptr) tokenizer->clear();
  if (records_model != nullptr) *records_model = true;
  // The caller built `model` from the directory's config.json.
  if (IsHfCheckpoint(path)) return ReadHfGpt2Weights(path, model);
  WEFT_RETURN_IF_ERROR(CheckNotDirectory(path));
  if (!IsSafetensorsFile(path)) return ReadLlmcCheckpoint(path, model);
  WEFT_ASSIGN_OR_RETURN(SafetensorsWeights file, ReadSafetensorsWeights(path));
  WEFT_RETURN_IF_ERROR(CheckNotBareHfFile(path, file));
  if (file.job) WEFT_RETURN_IF_ERROR(CheckSameArchitecture(file.job->model(), model, path));
  if (records_model != nullptr) *records_model = file.job.has_value();
  if (tokenizer != nullptr) *tokenizer = std::move(file.tokenizer);
  return std::move(file.weights);
}

absl::StatusOr<WeightsFile> ReadWeightsFile(const std::string& path) {
  WeightsFile out;
  if (IsHfCheckpoint(path)) {
    WEFT_ASSIGN_OR_RETURN(out.model, ReadHfGpt2Config(path, GptConfig()));
    WEFT_ASSIGN_OR_RETURN(out.weights, ReadHfGpt2Weights(path, out.model));
    out.seq_len = out.model.max_seq_len();
    // Its tokenizer.json when weft reads its scheme (GPT-2's).
    absl::StatusOr<std::string> tok = ReadHfTokenizer(path);
    if (!tok.ok()) return Annotate(tok.status(), "pass --tokenizer=FILE instead");
    out.tokenizer = *std::move(tok);
    return out;
  }
  WEFT_RETURN_IF_ERROR(CheckNotDirectory(path));
  if (!IsSafetensorsFile(path)) {
    WEFT_ASSIGN_OR_RETURN(out.model, LlmcConfig(path));
    WEFT_ASSIGN_OR_RETURN(out.weights, ReadLlmcCheckpoint(path, out.model));
    out.seq_len = out.model.max_seq_len();
    return out;
  }
  WEFT_ASSIGN_OR_RETURN(SafetensorsWeights file, ReadSafetensorsWeights(path));
  WEFT_RETURN_IF_ERROR(CheckNotBareHfFile(path, file));
  if (!file.job) {
    return FailedPrecondition(
        absl::StrCat(path, " records no model (no job_config in its metadata)"),
        "a weights file that says which GPT it holds: n_head, for one, is not in the shapes",
        "export it with //tools:ckpt export --format=safetensors, or sample the checkpoint "
        "with --checkpoint");
  }
  out.model = file.job->model();
  out.weights = std::move(file.weights);
  out.seq_len = file.job->train().seq_len() > 0 ? file.job->train().seq_len()
                                                : out.model.max_seq_len();
  out.tokenizer = std::move(file.tokenizer);
  return out;
}

}  // namespace weft
