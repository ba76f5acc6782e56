// The MLP classifier's training job: its data (Fashion-MNIST), its model,
// the flags it refuses, and the test accuracy after training.
#include "tools/train_main/mlp_train.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/trainer.h"
#include "data/data.h"
#include "models/mlp/classifier_evaluation.h"
#include "models/mlp/mlp_classifier.h"
#include "models/mlp/mlp_config.pb.h"
#include "tools/report/run_report.h"
#include "tools/train_main/train_main.h"

namespace weft {

namespace {

// Fashion-MNIST images and the MLP classifier over them.
class MlpTrainJob : public TrainJob {
 public:
  explicit MlpTrainJob(const MlpJob& job) : job_(job) {}

  absl::StatusOr<DataLoaders> OpenData(const data::DataLoader::Options& base) override {
    data::ImageDataOptions opt;
    if (!job_.train().data().data().empty()) opt.dir = ResolveUserPath(job_.train().data().data());
    const std::string& scaling = job_.model().scaling();
    if (scaling == "standardize") {
      opt.dataset.scaling = data::PixelScaling::kStandardize;
    } else if (scaling != "unit") {
      return InvalidArgument("--scaling=" + scaling, "unit or standardize");
    }
    opt.dataset.num_classes = job_.model().num_classes();
    opt.loader = base;
    WEFT_ASSIGN_OR_RETURN(data::ImageData d, data::OpenFashionMnistData(opt));
    if (d.num_features != job_.model().input_dim()) {
      return InvalidArgument(absl::StrFormat("images have %d features", d.num_features),
                             absl::StrFormat("--input_dim=%d", d.num_features));
    }
    return DataLoaders{std::move(d.train), std::move(d.test), d.num_classes};
  }

  absl::StatusOr<std::unique_ptr<Model>> MakeModel(const DataLoaders&) override {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<MlpClassifier> m, MlpClassifier::Create(job_.model()));
    return std::unique_ptr<Model>(std::move(m));
  }

  std::string InputField() const override { return "image"; }
  std::string TargetField() const override { return "label"; }
  std::string Describe() const override { return job_.DebugString(); }

 private:
  const MlpJob job_;
};

}  // namespace

absl::Status RunMlpTraining(const MlpJob& job) {
  Trainer::Options o;
  o.config = job.train();
  ResolveCheckpointPaths(&o.config);
  // No planner here (models/gpt's train has one): a budget would be ignored.
  if (!job.train().parallel().memory_budget().empty()) {
    return InvalidArgument(
        absl::StrCat("--memory_budget=", job.train().parallel().memory_budget(),
                     " for the MLP trainer"),
        "no --memory_budget: this trainer has no layout planner to hold it",
        "choose --strategy yourself; bazel run //tools:estimate shows a GPT job's memory");
  }
  // The classifier's test accuracy needs every prediction on one rank, and
  // its few layers have no pipeline split (the run trained, then failed).
  if (job.train().parallel().pp() != 1) {
    return InvalidArgument(absl::StrCat("--pp=", job.train().parallel().pp(),
                                        " for the MLP trainer"),
                           "--pp=1: the MLP classifier does not run as a pipeline",
                           "use a data-parallel strategy: --strategy=ddp, fsdp or zero");
  }
  // Text-model fields this trainer would silently ignore.
  for (const auto& [set, flag] : {std::pair{job.train().has_seq_len(), "--seq_len"},
                                  std::pair{job.train().data().has_tokenizer(), "--tokenizer"}}) {
    if (set) {
      return InvalidArgument(absl::StrCat(flag, " for the MLP trainer"),
                             "flags of the MLP job (--help lists them)",
                             absl::StrCat(flag, " belongs to //models/gpt:train's text data"));
    }
  }
  report::PrepareRunReport(&o.config);
  o.job = std::make_shared<MlpTrainJob>(job);
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(std::move(o)));
  WEFT_RETURN_IF_ERROR(trainer->Run());
  WEFT_ASSIGN_OR_RETURN(ClassificationResult r, EvaluateClassifier(*trainer));
  trainer->logger().Log(MetricsLogger::Record()
                            .Add("step", job.train().steps())
                            .Add("test_accuracy", r.accuracy)
                            .Add("test_correct", static_cast<double>(r.correct))
                            .Add("test_total", static_cast<double>(r.total)));
  return report::FinishRunReport(trainer->config(), trainer->parallel().world_rank);
}

}  // namespace weft
