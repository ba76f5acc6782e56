#include "models/gpt/train_sampler.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/tokenizer_factory.h"
#include "models/gpt/gpt.h"
#include "models/lm/generate.h"
#include "models/gpt/gpt.h"
#include "models/lm/prompt.h"

namespace weft {
namespace {

// The GPT the trainer steps: its root, or under dp (which wraps the root in
// its replicas) the master replica, the wrapper's child. It was only the
// root, so dp, which keeps the whole model, was refused as "this model".
Gpt* TrainedGpt(Trainer& trainer) {
  if (auto* gpt = dynamic_cast<Gpt*>(&trainer.model())) return gpt;
  for (Module* child : trainer.model().children()) {
    if (auto* gpt = dynamic_cast<Gpt*>(child)) return gpt;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainSampler>> TrainSampler::Create(const GptJob& job,
                                                                   Trainer& trainer) {
  if (job.sample_tokens() < 1) {
    return InvalidArgument(absl::StrCat("--sample_tokens=", job.sample_tokens()), "at least 1");
  }
  // Checked before training, not at the first sample step.
  WEFT_RETURN_IF_ERROR(CheckGenerateOptions({.temperature = job.sample_temperature()}, "--sample_"));
  const ParallelState& p = trainer.parallel();
  // Each strategy says whether it keeps the parameters whole under the
  // options the job resolved (--strategy_options=zero_stage=3 wins over
  // --zero_stage, which alone let zero-3 through to crash at the sample).
  std::vector<std::string> sharding = p.sharding_strategies;
  // Every rank a data-parallel replica: no model-parallel axis (also one a
  // strategy name would not show).
  if (p.dp_size != p.world_size && sharding.empty()) {
    sharding.push_back(absl::StrCat("model parallelism (", p.world_size / p.dp_size,
                                    " ranks per replica)"));
  }
  if (!sharding.empty() || TrainedGpt(trainer) == nullptr) {
    return FailedPrecondition(
        absl::StrCat("--sample_every with ",
                     sharding.empty() ? "this model" : absl::StrJoin(sharding, ", ")),
        "the whole model on rank 0: no strategy, dp, ddp, or zero stages 1-2",
        "save checkpoints (--checkpoint_every) and sample from them with //models/gpt:sample, "
        "which reads any layout whole");
  }
  if (trainer.tokenizer().empty()) {
    return FailedPrecondition("--sample_every on data without a tokenizer",
                              "a text job (its tokenizer decodes the sample)");
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                        data::ParseTokenizer(trainer.tokenizer(), "the training data's tokenizer"));
  WEFT_ASSIGN_OR_RETURN(std::vector<int32_t> prompt,
                        PromptTokens(*tokenizer, job.sample_prompt(), "sample_prompt"));
  return std::unique_ptr<TrainSampler>(
      new TrainSampler(job, std::move(tokenizer), std::move(prompt)));
}

absl::Status TrainSampler::AtStep(Trainer& trainer, int64_t step) {
  const bool due = step % job_.sample_every() == 0 || step == job_.train().steps();
  if (!due || trainer.parallel().world_rank != 0) return absl::OkStatus();
  const GenerateOptions g{.max_new_tokens = job_.sample_tokens(),
                          .temperature = job_.sample_temperature(),
                          .seed = job_.sample_seed(),
                          .stop_id = tokenizer_->eot_id(),
                          .vocab = tokenizer_->vocab_size()};
  std::vector<int32_t> tokens = prompt_;
  WEFT_RETURN_IF_ERROR(Generate(*TrainedGpt(trainer), job_.train().seq_len(),
                                trainer.context(), g, &tokens));
  std::vector<int32_t> made(tokens.begin() + prompt_.size(), tokens.end());
  if (!made.empty() && made.back() == g.stop_id) made.pop_back();
  WEFT_ASSIGN_OR_RETURN(std::string text, tokenizer_->Decode(made));
  std::printf("sample at step %lld: %s%s\n", static_cast<long long>(step),
              job_.sample_prompt().c_str(), text.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace weft
