// bazel run //models/gpt:train -- --config=models/gpt/configs/tiny.textproto
//     [--device=cpu|cuda] [--steps=N] [--seed=S] [--metrics_out=PATH] [--data=PATH] ...
//
// Trains a character- or BPE-level GPT on a text file, a token shard, or a
// directory of shards. Without --data it trains on Debian's fortunes corpus.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "core/runtime/trainer.h"
#include "data/data.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_config.pb.h"
#include "models/gpt/llmc_format.h"
#include "tools/report/run_report.h"
#include "tools/train_main/train_main.h"

namespace weft {
namespace {

// A real English corpus every Debian machine can get (package `fortunes`,
// installed by tools/setup.sh): about 1 MB of quotations and verse.
constexpr const char* kFortunesDir = "/usr/share/games/fortunes/";
constexpr const char* kDefaultCorpus[] = {"literature", "wisdom", "science", "people",
                                          "computers",  "humorists", "art", "songs-poems"};

absl::StatusOr<std::string> DataPath(const GptJob& job) {
  const std::string& given = job.train().data().data();
  if (!given.empty()) {
    std::vector<std::string> parts;
    for (absl::string_view p : absl::StrSplit(given, ',')) parts.push_back(ResolveUserPath(std::string(p)));
    return absl::StrJoin(parts, ",");
  }
  std::vector<std::string> files;
  for (const char* f : kDefaultCorpus) files.push_back(absl::StrCat(kFortunesDir, f));
  if (FILE* probe = std::fopen(files[0].c_str(), "r")) {
    std::fclose(probe);
  } else {
    return NotFound(absl::StrCat("default corpus ", files[0], " is missing"),
                    "Debian's fortunes package",
                    "run tools/setup.sh, or pass --data=PATH to any text file");
  }
  return absl::StrJoin(files, ",");
}

absl::Status Run(const GptJob& job) {
  WEFT_ASSIGN_OR_RETURN(std::string path, DataPath(job));
  Trainer::Options o;
  o.config = job.train();
  // `bazel run` starts in the runfiles tree: user paths are relative to
  // where the command was typed.
  o.config.set_checkpoint_dir(ResolveUserPath(o.config.checkpoint_dir()));
  if (o.config.resume() != "latest") o.config.set_resume(ResolveUserPath(o.config.resume()));
  auto resolved = std::make_shared<GptJob>(job);  // with the vocabulary filled in
  o.describe_job = [resolved] { return resolved->DebugString(); };
  report::PrepareRunReport(&o.config);
  o.open_data = [&](const data::DataLoader::Options& base) -> absl::StatusOr<DataLoaders> {
    data::TextDataOptions t;
    t.path = path;
    t.tokenizer = job.train().data().tokenizer();
    t.val_fraction = job.train().data().val_fraction();
    t.seq_len = job.train().seq_len();
    t.vocab_size = job.model().vocab_size();
    t.loader = base;
    WEFT_ASSIGN_OR_RETURN(data::TextData d, data::OpenTextData(t));
    return DataLoaders{std::move(d.train), std::move(d.val), d.vocab_size};
  };
  o.make_model = [&](const DataLoaders& d) -> absl::StatusOr<std::unique_ptr<Model>> {
    GptConfig config = job.model();
    if (config.vocab_size() == 0) config.set_vocab_size(static_cast<int32_t>(d.vocab_size));
    *resolved->mutable_model() = config;
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Gpt> gpt, Gpt::Create(config, job.train().seq_len()));
    return std::unique_ptr<Model>(std::move(gpt));
  };
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(std::move(o)));
  if (!job.init_from().empty() && job.train().resume().empty()) {
    const std::string from = ResolveUserPath(job.init_from());
    WEFT_ASSIGN_OR_RETURN(GptWeights weights, ReadLlmcCheckpoint(from, resolved->model()));
    WEFT_ASSIGN_OR_RETURN(std::vector<std::string> kept, trainer->LoadWeights(weights));
    if (!kept.empty()) {
      return FailedPrecondition(absl::StrCat(from, " has no weights for ", absl::StrJoin(kept, ", ")),
                                "every parameter of the model in the file");
    }
    std::printf("initialized from llm.c checkpoint %s\n", from.c_str());
  }
  WEFT_RETURN_IF_ERROR(trainer->Run());
  return report::FinishRunReport(trainer->config(), trainer->parallel().world_rank);
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::GptJob job;
  return weft::TrainMain(argc, argv,
                         "Train a GPT-2 family language model.\n"
                         "usage: train --config=models/gpt/configs/tiny.textproto [--flag=value ...]",
                         &job, [&] { return weft::Run(job); });
}
