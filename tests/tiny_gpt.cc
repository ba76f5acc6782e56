#include "tests/tiny_gpt.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "data/data.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_job.h"

namespace weft::testing {

JobTopology RankTopology(const comm::testing::RankContext& rc) {
  JobTopology topo;
  topo.rank = rc.rank;
  topo.world_size = rc.world_size;
  topo.local_rank = rc.rank;
  topo.store = rc.store;
  topo.description = absl::StrCat("test rank ", rc.rank, " of ", rc.world_size);
  return topo;
}

std::string WriteCorpus(const std::string& dir) {
  const std::string path = dir + "/corpus.txt";
  std::ofstream out(path);
  const char* lines[] = {
      "the quick brown fox jumps over the lazy dog",
      "a stitch in time saves nine, and every cloud has a silver lining",
      "all that glitters is not gold; fortune favours the bold",
      "to be or not to be, that is the question",
      "brevity is the soul of wit, and patience is a virtue"};
  for (int i = 0; i < 240; ++i) out << lines[(i * 7) % 5] << " " << (i % 13) << ".\n";
  return path;
}

GptJob TinyGptJob(const std::string& corpus) {
  GptJob job;
  TrainConfig* t = job.mutable_train();
  t->set_device("cpu");
  t->set_steps(20);
  t->set_seed(42);
  t->set_global_batch(8);
  t->set_micro_batch(8);
  t->set_seq_len(16);
  t->set_log_every(0);
  t->set_quiet(true);
  t->mutable_optim()->set_lr(3e-3f);
  t->mutable_optim()->set_warmup_steps(2);
  t->mutable_data()->set_data(corpus);
  t->mutable_data()->set_num_workers(1);
  t->mutable_data()->set_val_fraction(0.1);
  t->set_cpu_threads(1);  // ranks share the machine's cores
  GptConfig* m = job.mutable_model();
  m->set_n_layer(2);
  m->set_n_head(2);
  m->set_d_model(32);
  m->set_max_seq_len(16);
  m->set_vocab_pad_multiple(8);
  return job;
}

namespace {

// GPT's job over the test corpus, char-level, with no tokenizer recorded.
class TinyGptTrainJob : public GptTrainJob {
 public:
  explicit TinyGptTrainJob(const GptJob& job)
      : GptTrainJob(job, job.train().data().data()), given_(job) {}

  absl::StatusOr<DataLoaders> OpenData(const data::DataLoader::Options& base) override {
    data::TextDataOptions t;
    t.path = given_.train().data().data();
    t.tokenizer = "char";
    t.val_fraction = given_.train().data().val_fraction();
    t.seq_len = given_.train().seq_len();
    t.loader = base;
    WEFT_ASSIGN_OR_RETURN(data::TextData d, data::OpenTextData(t));
    return DataLoaders{std::move(d.train), std::move(d.val), d.vocab_size};
  }
  std::string Describe() const override { return given_.DebugString(); }

 private:
  const GptJob given_;
};

}  // namespace

Trainer::Options GptTrainerOptions(const GptJob& job, std::optional<JobTopology> topology) {
  Trainer::Options o;
  o.config = job.train();
  o.topology = std::move(topology);
  o.job = std::make_shared<TinyGptTrainJob>(job);
  return o;
}

std::shared_ptr<TrainJob> WithModel(std::shared_ptr<TrainJob> job,
                                    FunctionJob::MakeModelFn make_model) {
  return std::make_shared<FunctionJob>(
      [job](const data::DataLoader::Options& base) { return job->OpenData(base); },
      std::move(make_model), job->InputField(), job->TargetField());
}

absl::StatusOr<int64_t> TrainSamples(const GptJob& job) {
  data::DataLoader::Options one_rank;
  one_rank.batch_size = 1;
  one_rank.num_workers = 0;
  WEFT_ASSIGN_OR_RETURN(DataLoaders d, GptTrainerOptions(job).job->OpenData(one_rank));
  return d.train->dataset().num_samples();
}

absl::StatusOr<std::unique_ptr<Trainer>> MakeGptTrainer(
    const GptJob& job, std::optional<JobTopology> topology,
    const std::function<void(Trainer::Options&)>& customize) {
  Trainer::Options o = GptTrainerOptions(job, std::move(topology));
  if (customize) customize(o);
  return Trainer::Create(std::move(o));
}

absl::StatusOr<std::map<std::string, std::vector<float>>> ParameterSnapshot(Trainer& trainer) {
  WEFT_ASSIGN_OR_RETURN(std::vector<StatePiece> pieces, trainer.ExportState());
  WEFT_ASSIGN_OR_RETURN(std::vector<HostPiece> host, ToHost(pieces));
  WEFT_ASSIGN_OR_RETURN(auto full, Reassemble(host));
  std::map<std::string, std::vector<float>> params;
  for (auto& [name, values] : full) {
    if (name.find(':') == std::string::npos) params[name] = std::move(values);
  }
  return params;
}

double MaxRelativeDifference(const std::map<std::string, std::vector<float>>& a,
                             const std::map<std::string, std::vector<float>>& b) {
  double worst = 0;
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.size() != va.size()) return INFINITY;
    for (size_t i = 0; i < va.size(); ++i) {
      worst = std::max(worst, std::fabs(double(va[i]) - it->second[i]) /
                                  std::max(1.0, std::fabs(double(it->second[i]))));
    }
  }
  return worst;
}

}  // namespace weft::testing
