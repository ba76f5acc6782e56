#include "models/gpt/train_sampler.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/tokenizer_factory.h"
#include "models/gpt/generate.h"
#include "models/gpt/gpt.h"

namespace weft {

absl::Status CheckTrainSampling(const GptJob& job, Trainer& trainer) {
  if (job.sample_every() <= 0) return absl::OkStatus();
  if (job.sample_tokens() < 1) {
    return InvalidArgument(absl::StrCat("--sample_tokens=", job.sample_tokens()), "at least 1");
  }
  const ParallelState& p = trainer.parallel();
  std::vector<std::string> sharding;
  for (const std::string& name : p.strategy_names) {
    const bool whole = name == "ddp" || name == "dp" || name == "recompute" ||
                       (name == "zero" && job.train().parallel().zero_stage() <= 2);
    if (!whole) sharding.push_back(name);
  }
  // Every rank a data-parallel replica: no model-parallel axis (also one a
  // strategy name would not show).
  if (p.dp_size != p.world_size && sharding.empty()) {
    sharding.push_back(absl::StrCat("model parallelism (", p.world_size / p.dp_size,
                                    " ranks per replica)"));
  }
  if (!sharding.empty() || dynamic_cast<Gpt*>(&trainer.model()) == nullptr) {
    return FailedPrecondition(
        absl::StrCat("--sample_every with ", sharding.empty() ? "this model" : absl::StrJoin(sharding, ", ")),
        "the whole model on rank 0: no strategy, ddp, or zero stages 1-2",
        "save checkpoints (--checkpoint_every) and sample from them with //models/gpt:sample, "
        "which reads any layout whole");
  }
  if (trainer.tokenizer().empty()) {
    return FailedPrecondition("--sample_every on data without a tokenizer",
                              "a text job (its tokenizer decodes the sample)");
  }
  return absl::OkStatus();
}

absl::Status SampleAtStep(const GptJob& job, Trainer& trainer, int64_t step) {
  const bool due = job.sample_every() > 0 &&
                   (step % job.sample_every() == 0 || step == job.train().steps());
  if (!due || trainer.parallel().world_rank != 0) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                        data::ParseTokenizer(trainer.tokenizer(), "the training data's tokenizer"));
  std::vector<int32_t> tokens;
  if (job.sample_prompt().empty()) {
    if (tokenizer->eot_id() < 0) {
      return InvalidArgument("--sample_every with an empty --sample_prompt and a tokenizer "
                             "without an end-of-text token",
                             "a prompt to continue", "e.g. --sample_prompt=\"The \"");
    }
    tokens.push_back(tokenizer->eot_id());
  } else {
    WEFT_ASSIGN_OR_RETURN(tokens, tokenizer->Encode(job.sample_prompt()));
  }
  const GenerateOptions g{.max_new_tokens = job.sample_tokens(),
                          .temperature = job.sample_temperature(),
                          .seed = job.sample_seed(),
                          .stop_id = tokenizer->eot_id(),
                          .vocab = tokenizer->vocab_size()};
  const size_t prompt = tokens.size();
  auto* gpt = dynamic_cast<Gpt*>(&trainer.model());
  WEFT_RETURN_IF_ERROR(Generate(*gpt, job.train().seq_len(), trainer.context(), g, &tokens));
  std::vector<int32_t> made(tokens.begin() + prompt, tokens.end());
  if (!made.empty() && made.back() == g.stop_id) made.pop_back();
  WEFT_ASSIGN_OR_RETURN(std::string text, tokenizer->Decode(made));
  std::printf("sample at step %lld: %s%s\n", static_cast<long long>(step),
              job.sample_prompt().c_str(), text.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace weft
