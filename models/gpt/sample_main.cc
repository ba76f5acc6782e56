// bazel run -c opt //models/gpt:sample -- --checkpoint=/ckpt/run1 --prompt="ROMEO:"
//     [--tokens=200] [--temperature=0.8] [--top_k=40] [--seed=S] [--device=cuda]
//
// Prints text from a trained GPT: the prompt, then each sampled token as it
// comes (stdout); one line of figures at the end (stderr). The checkpoint
// may come from any world size and strategy mix: its weights are read
// whole, and it carries the model config and the tokenizer.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/layout.h"
#include "checkpoint/loader.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"
#include "data/tokenizer_factory.h"
#include "models/gpt/gpt.h"
#include "models/lm/generate.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_weights.h"
#include "models/gpt/weights_file.h"
#include "models/gpt/prompt.h"
#include "models/gpt/recorded_job.h"
#include "models/gpt/sample_config.pb.h"
#include "tools/train_main/train_main.h"

namespace weft {
namespace {

// What to sample from: the model, its weights, its window and tokenizer.
struct Source {
  GptConfig model;
  GptWeights weights;
  int64_t seq_len = 0;
  std::string tokenizer;  // serialized; empty when the source has none
  std::string what;       // for the closing line
};

absl::StatusOr<Source> FromCheckpoint(const std::string& path) {
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
  WEFT_ASSIGN_OR_RETURN(GptJob job, ParseRecordedGptJob(c->meta.job_config(), c->dir));
  Source s;
  s.model = job.model();
  s.seq_len = job.train().seq_len();
  s.tokenizer = c->meta.tokenizer();
  s.what = absl::StrCat(c->dir, " (step ", c->meta.step(), ")");
  // Parameters only: optimizer entries are "<param>:<kind>".
  WEFT_ASSIGN_OR_RETURN(s.weights, ckpt::ReadFullTensors(*c, [](const std::string& name) {
                          return name.find(':') == std::string::npos;
                        }));
  return s;
}

absl::StatusOr<Source> FromWeightsFile(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(WeightsFile f, ReadWeightsFile(path));
  return Source{.model = std::move(f.model),
                .weights = std::move(f.weights),
                .seq_len = f.seq_len,
                .tokenizer = std::move(f.tokenizer),
                .what = path};
}

absl::StatusOr<Source> OpenSource(const SampleJob& job) {
  if (job.checkpoint().empty() == job.init_from().empty()) {
    return InvalidArgument("--checkpoint and --init_from: need exactly one",
                           "a weft checkpoint (--checkpoint=DIR) or a weights file (--init_from=FILE: "
                           "llm.c's, or a weft .safetensors export)");
  }
  WEFT_ASSIGN_OR_RETURN(Source s, job.checkpoint().empty()
                                      ? FromWeightsFile(ResolveUserPath(job.init_from()))
                                      : FromCheckpoint(ResolveUserPath(job.checkpoint())));
  if (!job.tokenizer().empty()) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> t,
                          data::LoadTokenizer(ResolveUserPath(job.tokenizer())));
    s.tokenizer = t->Serialize();
  }
  if (s.tokenizer.empty()) {
    return FailedPrecondition(absl::StrCat(s.what, " carries no tokenizer"),
                              "a tokenizer to encode the prompt and decode the sample",
                              "pass --tokenizer=FILE (e.g. the tokenizer.txt that prepare_data "
                              "wrote); checkpoints of text jobs carry their own");
  }
  if (job.seq_len() > 0) {
    if (job.seq_len() > s.model.max_seq_len()) {
      return InvalidArgument(absl::StrCat("--seq_len=", job.seq_len()),
                             absl::StrCat("at most the model's max_seq_len=", s.model.max_seq_len()));
    }
    s.seq_len = job.seq_len();
  }
  return s;
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

absl::Status Run(const SampleJob& job) {
  GenerateOptions g{.max_new_tokens = job.tokens(),
                    .temperature = job.temperature(),
                    .top_k = job.top_k(),
                    .seed = job.seed(),
                    .kv_cache = job.kv_cache()};
  // Before the weights are read, so a bad flag fails at once.
  WEFT_RETURN_IF_ERROR(CheckGenerateOptions(g, "--"));
  // A negative window was taken as 0 (the checkpoint's), without a word.
  if (job.seq_len() < 0) {
    return InvalidArgument(absl::StrCat("--seq_len=", job.seq_len()),
                           ">= 0 (0: the window the model was trained with)");
  }
  WEFT_ASSIGN_OR_RETURN(Source src, OpenSource(job));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                        data::ParseTokenizer(src.tokenizer, "the tokenizer"));
  if (tokenizer->vocab_size() > src.model.vocab_size()) {
    return FailedPrecondition(
        absl::StrCat("the tokenizer has ", tokenizer->vocab_size(), " ids"),
        absl::StrCat("at most the model's vocab_size=", src.model.vocab_size()),
        "pass the tokenizer the model was trained with");
  }
  WEFT_ASSIGN_OR_RETURN(RunContext ctx, SampleContext(job));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> model, Gpt::Create(src.model, src.seq_len));
  WEFT_RETURN_IF_ERROR(MaterializeParameters(
      *model, {.device = ctx.device, .param_dtype = ctx.compute_dtype, .allocate_grads = false}));
  ToModelShapes(*model, &src.weights);  // a tp checkpoint's packed qkv
  WEFT_RETURN_IF_ERROR(ImportWeights(src.weights, *model));

  WEFT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                        PromptTokens(*tokenizer, job.prompt(), "prompt"));
  std::printf("%s", job.prompt().c_str());
  std::fflush(stdout);
  g.stop_id = job.stop_at_eot() ? tokenizer->eot_id() : -1;
  g.vocab = tokenizer->vocab_size();
  absl::Status decode_error;
  const size_t prompt_tokens = tokens.size();
  const auto start = std::chrono::steady_clock::now();
  WEFT_RETURN_IF_ERROR(Generate(*model, src.seq_len, ctx, g, &tokens, [&](int32_t id) {
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
               made, s, made / std::max(s, 1e-9), src.what.c_str(),
               static_cast<long long>(src.seq_len), job.kv_cache() ? "on" : "off");
  return absl::OkStatus();
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::SampleJob job;
  return weft::TrainMain(argc, argv,
                         "Sample text from a trained GPT (a weft checkpoint or an llm.c file).\n"
                         "usage: sample --checkpoint=DIR [--prompt=TEXT] [--tokens=N] "
                         "[--temperature=T] [--top_k=K] [--seed=S]",
                         &job, [&] { return weft::Run(job); });
}
