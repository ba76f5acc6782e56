#include "models/lm/sample_text.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/base/user_path.h"
#include "data/tokenizer_factory.h"
#include "models/lm/prompt.h"

namespace weft {

absl::StatusOr<GenerateOptions> SampleOptions(const SampleJob& job) {
  GenerateOptions g{.max_new_tokens = job.tokens(),
                    .temperature = job.temperature(),
                    .top_k = job.top_k(),
                    .seed = job.seed(),
                    .kv_cache = job.kv_cache()};
  WEFT_RETURN_IF_ERROR(CheckGenerateOptions(g, "--"));
  // A negative window was taken as 0 (the checkpoint's), without a word.
  if (job.seq_len() < 0) {
    return InvalidArgument(absl::StrCat("--seq_len=", job.seq_len()),
                           ">= 0 (0: the window the model was trained with)");
  }
  if (job.checkpoint().empty() == job.init_from().empty()) {
    return InvalidArgument("--checkpoint and --init_from: need exactly one",
                           "a weft checkpoint (--checkpoint=DIR) or a weights file (--init_from=FILE: "
                           "llm.c's for a GPT, or a weft .safetensors export)");
  }
  return g;
}

absl::StatusOr<RunContext> SampleContext(const SampleJob& job) {
  WEFT_ASSIGN_OR_RETURN(Device device, ParseDevice(job.device()));
  DType compute = device.is_cuda() ? DType::kBF16 : DType::kF32;
  if (job.dtype() != "auto") {
    WEFT_ASSIGN_OR_RETURN(compute, ParseDType(job.dtype()));
  }
  if (device.is_cpu() && compute != DType::kF32) {
    return InvalidArgument(absl::StrCat("--dtype=", job.dtype(), " on CPU"), "f32 (or auto) on CPU");
  }
  return RunContext::Create(device, compute);
}

absl::StatusOr<SampledCheckpoint> ReadSampleCheckpoint(const std::string& path) {
  absl::StatusOr<ckpt::Checkpoint> c = ckpt::OpenCheckpoint(path);
  if (!c.ok() && absl::IsNotFound(c.status())) {
    // A checkpoint directory: its newest step.
    absl::StatusOr<std::string> latest = ckpt::ResolveResume(path, "latest");
    if (!latest.ok()) {
      return NotFound(absl::StrCat("no checkpoint at ", path),
                      "a step_<N> directory, or a directory holding some",
                      "train with --checkpoint_dir=DIR --checkpoint_every=K (a save also "
                      "follows the last step)");
    }
    c = ckpt::OpenCheckpoint(*latest);
  }
  WEFT_RETURN_IF_ERROR(c.status());
  SampledCheckpoint s;
  s.job_config = c->meta.job_config();
  s.tokenizer = c->meta.tokenizer();
  s.what = absl::StrCat(c->dir, " (step ", c->meta.step(), ")");
  // Parameters only: optimizer entries are "<param>:<kind>".
  WEFT_ASSIGN_OR_RETURN(s.weights, ckpt::ReadFullTensors(*c, [](const std::string& name) {
                          return name.find(':') == std::string::npos;
                        }));
  return s;
}

absl::StatusOr<std::string> SampleTokenizer(const SampleJob& job, const std::string& carried,
                                            const std::string& what) {
  if (!job.tokenizer().empty()) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> t,
                          data::LoadTokenizer(
                              absl::StartsWith(job.tokenizer(), "hf:")
                                  ? absl::StrCat("hf:", ResolveUserPath(job.tokenizer().substr(3)))
                                  : ResolveUserPath(job.tokenizer())));
    return t->Serialize();
  }
  if (carried.empty()) {
    return FailedPrecondition(absl::StrCat(what, " carries no tokenizer"),
                              "a tokenizer to encode the prompt and decode the sample",
                              "pass --tokenizer=FILE (e.g. the tokenizer.txt that prepare_data "
                              "wrote); checkpoints of text jobs carry their own");
  }
  return carried;
}

absl::Status SampleText(CausalLm& model, int64_t seq_len, const RunContext& ctx,
                        const SampleJob& job, GenerateOptions g, const std::string& serialized,
                        const std::string& what) {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                        data::ParseTokenizer(serialized, "the tokenizer"));
  const int64_t vocab = model.lm_shape().vocab_size;
  if (tokenizer->vocab_size() > vocab) {
    return FailedPrecondition(absl::StrCat("the tokenizer has ", tokenizer->vocab_size(), " ids"),
                              absl::StrCat("at most the model's vocab_size=", vocab),
                              "pass the tokenizer the model was trained with");
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                        PromptTokens(*tokenizer, job.prompt(), "prompt"));
  std::printf("%s", job.prompt().c_str());
  std::fflush(stdout);
  g.stop_id = job.stop_at_eot() ? tokenizer->eot_id() : -1;
  g.vocab = tokenizer->vocab_size();
  absl::Status decode_error;
  const size_t prompt_tokens = tokens.size();
  const auto start = std::chrono::steady_clock::now();
  WEFT_RETURN_IF_ERROR(Generate(model, seq_len, ctx, g, &tokens, [&](int32_t id) {
    if (id == g.stop_id) return;
    absl::StatusOr<std::string> text = tokenizer->Decode({id});
    if (!text.ok()) {
      decode_error.Update(text.status());
      return;
    }
    std::fwrite(text->data(), 1, text->size(), stdout);
    std::fflush(stdout);
  }));
  WEFT_RETURN_IF_ERROR(decode_error);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t made = tokens.size() - prompt_tokens;
  std::printf("\n");
  std::fprintf(stderr,
               "sampled %zu tokens in %.2f s (%.1f tokens/s) from %s, window %lld, kv cache %s\n",
               made, s, made / std::max(s, 1e-9), what.c_str(), static_cast<long long>(seq_len),
               job.kv_cache() ? "on" : "off");
  return absl::OkStatus();
}

}  // namespace weft
