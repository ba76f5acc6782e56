// bazel run -c opt //models/llama:sample -- --checkpoint=/ckpt/run1 --prompt="ROMEO:"
//     [--tokens=200] [--temperature=0.8] [--top_k=40] [--seed=S] [--kv_cache=false]
//
// Prints text from a trained Llama: the prompt, then each sampled token as
// it comes (stdout); one line of figures at the end (stderr). The source is
// a checkpoint of //models/llama:train (any world size and strategy mix:
// its weights are read whole) or a safetensors export of one
// (//tools:ckpt export --format=safetensors); both record the job, so the
// model's shape comes with them. Or a Hugging Face checkpoint directory
// (--init_from=DIR, its shape from config.json; --tokenizer is needed). The key/value cache keeps each K/V head
// once per query head of its group, and rotary angles at each token's
// position.
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"
#include "google/protobuf/text_format.h"
#include "models/gpt/gpt_weights.h"
#include "models/llama/hf_checkpoint.h"
#include "models/llama/llama.h"
#include "models/llama/llama_config.pb.h"
#include "models/lm/sample_config.pb.h"
#include "models/lm/sample_text.h"
#include "tools/train_main/train_main.h"

namespace weft {
namespace {

struct Source {
  LlamaJob job;
  std::map<std::string, ckpt::HostTensor> weights;
  std::string tokenizer;
  std::string what;
};

absl::StatusOr<LlamaJob> RecordedLlamaJob(const std::string& text, const std::string& what) {
  LlamaJob job;
  if (text.empty() || !google::protobuf::TextFormat::ParseFromString(text, &job) ||
      !job.has_model()) {
    return FailedPrecondition(absl::StrCat(what, " records no Llama job"),
                              "a checkpoint of //models/llama:train, or its safetensors export",
                              "a GPT's checkpoint samples with //models/gpt:sample");
  }
  return job;
}

absl::StatusOr<Source> OpenSource(const SampleJob& job) {
  Source s;
  if (!job.checkpoint().empty()) {
    WEFT_ASSIGN_OR_RETURN(SampledCheckpoint c,
                          ReadSampleCheckpoint(ResolveUserPath(job.checkpoint())));
    WEFT_ASSIGN_OR_RETURN(s.job, RecordedLlamaJob(c.job_config, c.what));
    s.weights = std::move(c.weights);
    s.tokenizer = std::move(c.tokenizer);
    s.what = std::move(c.what);
    return s;
  }
  const std::string path = ResolveUserPath(job.init_from());
  if (IsHfCheckpoint(path)) {
    // The shape from config.json; the window defaults to the model's positions.
    WEFT_ASSIGN_OR_RETURN(*s.job.mutable_model(), ReadHfLlamaConfig(path, LlamaConfig()));
    s.job.mutable_train()->set_seq_len(s.job.model().max_seq_len());
    WEFT_ASSIGN_OR_RETURN(s.weights, ReadHfLlamaWeights(path, s.job.model()));
    s.what = path;
    // Its tokenizer.json when weft reads its scheme; --tokenizer overrides.
    if (job.tokenizer().empty()) {
      absl::StatusOr<std::string> tok = ReadHfTokenizer(path);
      if (!tok.ok()) return Annotate(tok.status(), "pass --tokenizer=FILE instead");
      s.tokenizer = *std::move(tok);
    }
    return s;
  }
  WEFT_ASSIGN_OR_RETURN(ckpt::SafetensorsFile f, ckpt::ReadSafetensors(path));
  const auto recorded = f.metadata.find("job_config");
  WEFT_ASSIGN_OR_RETURN(
      s.job, RecordedLlamaJob(recorded == f.metadata.end() ? "" : recorded->second, path));
  for (auto& [name, t] : f.tensors) {
    if (name.find(':') == std::string::npos) s.weights.emplace(name, std::move(t));
  }
  if (const auto tok = f.metadata.find("tokenizer"); tok != f.metadata.end()) {
    s.tokenizer = tok->second;
  }
  s.what = path;
  return s;
}

absl::Status Run(const SampleJob& job) {
  WEFT_ASSIGN_OR_RETURN(GenerateOptions g, SampleOptions(job));
  WEFT_ASSIGN_OR_RETURN(Source src, OpenSource(job));
  WEFT_ASSIGN_OR_RETURN(std::string tokenizer, SampleTokenizer(job, src.tokenizer, src.what));
  int64_t seq_len = src.job.train().seq_len();
  if (job.seq_len() > 0) {
    if (job.seq_len() > src.job.model().max_seq_len()) {
      return InvalidArgument(absl::StrCat("--seq_len=", job.seq_len()),
                             absl::StrCat("at most the model's max_seq_len=",
                                          src.job.model().max_seq_len(), " (its rotary table)"));
    }
    seq_len = job.seq_len();
  }
  WEFT_ASSIGN_OR_RETURN(RunContext ctx, SampleContext(job));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Llama> model, Llama::Create(src.job.model(), seq_len));
  WEFT_RETURN_IF_ERROR(MaterializeParameters(
      *model, {.device = ctx.device, .param_dtype = ctx.compute_dtype, .allocate_grads = false}));
  ToModelShapes(*model, &src.weights);  // a tp checkpoint's packed gate_up
  WEFT_RETURN_IF_ERROR(ImportWeights(src.weights, *model));
  return SampleText(*model, seq_len, ctx, job, g, tokenizer, src.what);
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::SampleJob job;
  return weft::TrainMain(argc, argv,
                         "Sample text from a trained Llama (a weft checkpoint or its export).\n"
                         "usage: sample --checkpoint=DIR [--prompt=TEXT] [--tokens=N] "
                         "[--temperature=T] [--top_k=K] [--seed=S]",
                         &job, [&] { return weft::Run(job); });
}
