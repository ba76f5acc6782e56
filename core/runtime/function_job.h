// A TrainJob from two functions: for tests and benchmarks whose data and
// model are a few lines (synthetic datasets, a model swapped in). A model
// family with its own config writes a TrainJob class instead (models/gpt).
#ifndef WEFT_CORE_RUNTIME_FUNCTION_JOB_H_
#define WEFT_CORE_RUNTIME_FUNCTION_JOB_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/runtime/train_job.h"

namespace weft {

class FunctionJob : public TrainJob {
 public:
  using OpenDataFn = std::function<absl::StatusOr<DataLoaders>(const data::DataLoader::Options&)>;
  using MakeModelFn = std::function<absl::StatusOr<std::unique_ptr<Model>>(const DataLoaders&)>;

  FunctionJob(OpenDataFn open_data, MakeModelFn make_model, std::string input_field = "inputs",
              std::string target_field = "targets")
      : open_data_(std::move(open_data)),
        make_model_(std::move(make_model)),
        input_field_(std::move(input_field)),
        target_field_(std::move(target_field)) {}

  absl::StatusOr<DataLoaders> OpenData(const data::DataLoader::Options& base) override {
    return open_data_(base);
  }
  absl::StatusOr<std::unique_ptr<Model>> MakeModel(const DataLoaders& data) override {
    return make_model_(data);
  }
  std::string InputField() const override { return input_field_; }
  std::string TargetField() const override { return target_field_; }

 private:
  OpenDataFn open_data_;
  MakeModelFn make_model_;
  std::string input_field_;
  std::string target_field_;
};

}  // namespace weft

#endif  // WEFT_CORE_RUNTIME_FUNCTION_JOB_H_
