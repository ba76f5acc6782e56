// What the sample targets of every language-model family share
// (//models/gpt:sample, //models/llama:sample): the flags' checks, the
// device context, a checkpoint read whole, the tokenizer, and the loop
// that prints the prompt and each token as it comes. A family's main only
// turns its source (a checkpoint's recorded job, a weights file) into a
// model.
#ifndef WEFT_MODELS_LM_SAMPLE_TEXT_H_
#define WEFT_MODELS_LM_SAMPLE_TEXT_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/host_tensor.h"
#include "core/nn/causal_lm.h"
#include "core/nn/run_context.h"
#include "models/lm/generate.h"
#include "models/lm/sample_config.pb.h"

namespace weft {

// The generation options the flags ask for, checked before anything is
// read (so a bad flag fails at once).
absl::StatusOr<GenerateOptions> SampleOptions(const SampleJob& job);

// The device and compute dtype of --device and --dtype.
absl::StatusOr<RunContext> SampleContext(const SampleJob& job);

// A weft checkpoint read whole: a step_<N> directory, or a checkpoint
// directory's newest step, of any world size and strategy mix.
struct SampledCheckpoint {
  std::map<std::string, ckpt::HostTensor> weights;  // parameters by name
  std::string job_config;                          // the recorded job, as text
  std::string tokenizer;                           // serialized; may be empty
  std::string what;                                // "DIR (step N)"
};
absl::StatusOr<SampledCheckpoint> ReadSampleCheckpoint(const std::string& path);

// --tokenizer when given, else `carried` (the source's); an error naming
// `what` when there is neither.
absl::StatusOr<std::string> SampleTokenizer(const SampleJob& job, const std::string& carried,
                                            const std::string& what);

// Prints the prompt and the sampled text (stdout) from `model`, materialized
// on ctx's device, over a window of seq_len tokens; one line of figures at
// the end (stderr).
absl::Status SampleText(CausalLm& model, int64_t seq_len, const RunContext& ctx,
                        const SampleJob& job, GenerateOptions options,
                        const std::string& tokenizer, const std::string& what);

}  // namespace weft

#endif  // WEFT_MODELS_LM_SAMPLE_TEXT_H_
