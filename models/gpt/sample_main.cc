// bazel run -c opt //models/gpt:sample -- --checkpoint=/ckpt/run1 --prompt="ROMEO:"
//     [--tokens=200] [--temperature=0.8] [--top_k=40] [--seed=S] [--device=cuda]
//
// Prints text from a trained GPT: the prompt, then each sampled token as it
// comes (stdout); one line of figures at the end (stderr). The checkpoint
// may come from any world size and strategy mix: its weights are read
// whole, and it carries the model config and the tokenizer. What every
// family's sampler shares is models/lm/sample_text.h.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/nn/materialize.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/gpt_weights.h"
#include "models/gpt/recorded_job.h"
#include "models/gpt/weights_file.h"
#include "models/lm/sample_config.pb.h"
#include "models/lm/sample_text.h"
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
  WEFT_ASSIGN_OR_RETURN(SampledCheckpoint c, ReadSampleCheckpoint(path));
  WEFT_ASSIGN_OR_RETURN(GptJob job, ParseRecordedGptJob(c.job_config, c.what));
  return Source{.model = job.model(),
                .weights = std::move(c.weights),
                .seq_len = job.train().seq_len(),
                .tokenizer = std::move(c.tokenizer),
                .what = std::move(c.what)};
}

absl::StatusOr<Source> FromWeightsFile(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(WeightsFile f, ReadWeightsFile(path));
  return Source{.model = std::move(f.model),
                .weights = std::move(f.weights),
                .seq_len = f.seq_len,
                .tokenizer = std::move(f.tokenizer),
                .what = path};
}

absl::Status Run(const SampleJob& job) {
  WEFT_ASSIGN_OR_RETURN(GenerateOptions g, SampleOptions(job));
  WEFT_ASSIGN_OR_RETURN(Source src, job.checkpoint().empty()
                                        ? FromWeightsFile(ResolveUserPath(job.init_from()))
                                        : FromCheckpoint(ResolveUserPath(job.checkpoint())));
  WEFT_ASSIGN_OR_RETURN(std::string tokenizer, SampleTokenizer(job, src.tokenizer, src.what));
  if (job.seq_len() > 0) {
    if (job.seq_len() > src.model.max_seq_len()) {
      return InvalidArgument(absl::StrCat("--seq_len=", job.seq_len()),
                             absl::StrCat("at most the model's max_seq_len=", src.model.max_seq_len()));
    }
    src.seq_len = job.seq_len();
  }
  WEFT_ASSIGN_OR_RETURN(RunContext ctx, SampleContext(job));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> model, Gpt::Create(src.model, src.seq_len));
  WEFT_RETURN_IF_ERROR(MaterializeParameters(
      *model, {.device = ctx.device, .param_dtype = ctx.compute_dtype, .allocate_grads = false}));
  ToModelShapes(*model, &src.weights);  // a tp checkpoint's packed qkv
  WEFT_RETURN_IF_ERROR(ImportWeights(src.weights, *model));
  return SampleText(*model, src.seq_len, ctx, job, g, tokenizer, src.what);
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
