// The GPT job a checkpoint records (its metadata's job_config, text format),
// read by //models/gpt:sample and //tools:ckpt.
#ifndef WEFT_MODELS_GPT_RECORDED_JOB_H_
#define WEFT_MODELS_GPT_RECORDED_JOB_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/gpt/gpt_config.pb.h"

namespace weft {

// `job_config` as a GptJob with a model; an error naming `dir` and holding
// protobuf's complaint when it is another job's (an MLP checkpoint's, say).
// Logs nothing: TextFormat::ParseFromString printed a raw
// "[libprotobuf ERROR ...]" line ahead of the tools' own message.
absl::StatusOr<GptJob> ParseRecordedGptJob(const std::string& job_config, const std::string& dir);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_RECORDED_JOB_H_
