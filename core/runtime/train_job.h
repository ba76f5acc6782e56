// TrainJob: what a model family supplies to the trainer, and nothing else.
// The trainer owns the loop, the strategies and the checkpoints; a job says
// where its data comes from, which model to build over it, and how the
// whole job is written down. models/gpt, models/llama and the MLP trainer
// each have one; the optional hooks default to doing nothing.
//
//   class MyJob : public TrainJob {
//    public:
//     absl::StatusOr<DataLoaders> OpenData(const data::DataLoader::Options& base) override;
//     absl::StatusOr<std::unique_ptr<Model>> MakeModel(const DataLoaders& data) override;
//   };
//   Trainer::Options o;
//   o.config = train_config;
//   o.job = std::make_shared<MyJob>();
#ifndef WEFT_CORE_RUNTIME_TRAIN_JOB_H_
#define WEFT_CORE_RUNTIME_TRAIN_JOB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.pb.h"
#include "core/nn/model.h"
#include "data/data_loader.h"

namespace weft {

class Trainer;

struct DataLoaders {
  std::unique_ptr<data::DataLoader> train;
  std::unique_ptr<data::DataLoader> val;  // may be null
  int64_t vocab_size = 0;                 // classes for classifiers
  // Text jobs: the tokenizer (data::Tokenizer::Serialize), saved in every
  // checkpoint so that it samples and encodes without the training data.
  std::string tokenizer;
};

class TrainJob {
 public:
  virtual ~TrainJob() = default;

  // Opens this rank's loaders; the trainer has filled batch size, rank,
  // world, seed and device into `base`.
  virtual absl::StatusOr<DataLoaders> OpenData(const data::DataLoader::Options& base) = 0;
  // Builds the model (shapes only) once the data is known (its vocabulary).
  virtual absl::StatusOr<std::unique_ptr<Model>> MakeModel(const DataLoaders& data) = 0;

  // The batch fields the model reads its inputs and targets from.
  virtual std::string InputField() const { return "inputs"; }
  virtual std::string TargetField() const { return "targets"; }
  // The whole job (model and training, with what startup resolved, such as
  // the vocabulary size) in protobuf text: recorded in checkpoints and
  // agreed by every rank. Empty: the TrainConfig alone.
  virtual std::string Describe() const { return ""; }
  // With --resume's checkpoint, before its tensors load: a job refuses
  // another architecture by the flag that differs, which a missing tensor or
  // an equal shape would not name (tie_weights, n_head).
  virtual absl::Status CheckResumed(const ckpt::Metadata& resumed) {
    (void)resumed;
    return absl::OkStatus();
  }
  // After each step of Run (after its log line, evaluation and checkpoint),
  // on every rank: e.g. sampling text from the model.
  virtual absl::Status AfterStep(Trainer& trainer, int64_t step) {
    (void)trainer;
    (void)step;
    return absl::OkStatus();
  }
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_TRAIN_JOB_H_
