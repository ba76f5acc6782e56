#include "models/gpt/recorded_job.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/base/errors.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace weft {
namespace {

// Keeps the parser's first error instead of logging every one.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!first_.empty()) return;
    first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ",
                          absl::StripSuffix(message, "."));
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

absl::StatusOr<GptJob> ParseRecordedGptJob(const std::string& job_config, const std::string& dir) {
  GptJob job;
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(job_config, &job) || !job.has_model()) {
    return FailedPrecondition(
        absl::StrCat(dir, " does not record a GPT job config",
                     errors.first().empty() ? "" : absl::StrCat(" (", errors.first(), ")")),
        "a checkpoint of //models/gpt:train");
  }
  return job;
}

}  // namespace weft
