#include "models/gpt/weights_file.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "checkpoint/safetensors.h"
#include "core/nn/materialize.h"
#include "gtest/gtest.h"
#include "models/gpt/gpt.h"
#include "models/gpt/llmc_format.h"

namespace weft {
namespace {

GptConfig Tiny() {
  GptConfig c;
  c.set_n_layer(2);
  c.set_n_head(2);
  c.set_d_model(8);
  c.set_vocab_size(11);
  c.set_vocab_pad_multiple(8);
  c.set_max_seq_len(8);
  return c;
}

std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

GptWeights WeightsOf(const GptConfig& c, uint64_t seed) {
  std::unique_ptr<Gpt> gpt = *Gpt::Create(c, c.max_seq_len());
  WEFT_CHECK_OK(MaterializeParameters(*gpt, {.seed = seed, .allocate_grads = false}));
  return *ExportWeights(*gpt);
}

// A safetensors file as //tools:ckpt export writes it: weights, and the job
// they were trained in (text format) when `job` is set.
std::string WriteExport(const std::string& name, const GptWeights& w, const GptConfig* model,
                        const std::string& tokenizer = "") {
  std::map<std::string, std::string> md = {{"format", "weft-weights"}};
  if (model != nullptr) {
    md["job_config"] = absl::StrCat("train { seq_len: 6 } model { ", model->ShortDebugString(), " }");
  }
  if (!tokenizer.empty()) md["tokenizer"] = tokenizer;
  const std::string path = TempPath(name);
  WEFT_CHECK_OK(ckpt::WriteSafetensors(path, w, {.metadata = md}));
  return path;
}

// A checkpoint directory given as --init_from is named as one, with the
// export that makes a weights file of it (it was "the file is truncated").
TEST(WeightsFileTest, DirectoryIsNamedAsOne) {
  const std::string dir = TempPath("ckpt_dir");
  std::filesystem::create_directories(dir);
  absl::StatusOr<GptWeights> init = ReadInitWeights(dir, Tiny());
  ASSERT_FALSE(init.ok());
  EXPECT_NE(init.status().message().find("is a directory"), std::string::npos) << init.status();
  EXPECT_NE(init.status().message().find("ckpt -- export"), std::string::npos) << init.status();
  absl::StatusOr<WeightsFile> sample = ReadWeightsFile(dir);
  ASSERT_FALSE(sample.ok());
  EXPECT_NE(sample.status().message().find("is a directory"), std::string::npos)
      << sample.status();
}

TEST(WeightsFileTest, SafetensorsExportGivesBackEveryWeight) {
  const GptConfig c = Tiny();
  const GptWeights w = WeightsOf(c, 5);
  const std::string path = WriteExport("w.safetensors", w, &c);
  absl::StatusOr<GptWeights> got = ReadInitWeights(path, c);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), w.size());
  for (const auto& [name, t] : w) {
    ASSERT_TRUE(got->count(name)) << name;
    EXPECT_EQ(got->at(name).shape, t.shape) << name;
    EXPECT_EQ(got->at(name).values, t.values) << name;
  }
}

TEST(WeightsFileTest, ConsolidatedOptimizerStateIsLeftOut) {
  const GptConfig c = Tiny();
  GptWeights w = WeightsOf(c, 5);
  w["ln_f.weight:exp_avg"] = w.at("ln_f.weight");
  absl::StatusOr<GptWeights> got = ReadInitWeights(WriteExport("full.safetensors", w, &c), c);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->count("ln_f.weight:exp_avg"));
  EXPECT_TRUE(got->count("ln_f.weight"));
}

// n_head and tie_weights do not show in the shapes: a recorded job that
// differs is refused with the flags, instead of training another model.
TEST(WeightsFileTest, RecordedModelMustAgreeOnWhatShapesHide) {
  GptConfig file = Tiny();
  file.set_n_head(4);
  const std::string path = WriteExport("heads.safetensors", WeightsOf(Tiny(), 5), &file);
  absl::StatusOr<GptWeights> got = ReadInitWeights(path, Tiny());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("n_head 4 in " + path + " vs 2 in the model"),
            std::string::npos)
      << got.status();
  EXPECT_NE(got.status().message().find("--model.n_head=4"), std::string::npos) << got.status();
  // Without a record (a file from another program) the names and shapes are
  // all there is, checked when the trainer loads them.
  bool recorded = true;
  EXPECT_TRUE(ReadInitWeights(WriteExport("bare.safetensors", WeightsOf(Tiny(), 5), nullptr),
                              Tiny(), nullptr, &recorded)
                  .ok());
  EXPECT_FALSE(recorded);  // the trainer says n_head is the flags' then
}

// The vocabulary hides inside the padded rows: 107 and 54 tokens both pad
// to 128 with vocab_pad_multiple 128.
TEST(WeightsFileTest, RecordedVocabularyMustMatch) {
  GptConfig file = Tiny(), model = Tiny();
  file.set_vocab_size(107);
  model.set_vocab_size(54);
  absl::Status s = CheckSameArchitecture(file, model, "w.safetensors");
  EXPECT_NE(s.message().find("vocab_size 107 in w.safetensors vs 54 in the model"),
            std::string::npos)
      << s;
  // The vocabulary follows the tokenizer: the hint names that, not vocab_size.
  EXPECT_NE(s.message().find("--tokenizer=FILE"), std::string::npos) << s;
  file.set_vocab_size(0);  // unresolved: nothing to compare
  EXPECT_TRUE(CheckSameArchitecture(file, model, "w.safetensors").ok());
}

TEST(WeightsFileTest, SamplingTakesTheRecordedModelWindowAndTokenizer) {
  GptConfig c = Tiny();
  c.set_n_head(4);
  const std::string path =
      WriteExport("s.safetensors", WeightsOf(c, 5), &c, "weft-tokenizer char v1\n1\n97\n");
  std::string tokenizer;
  ASSERT_TRUE(ReadInitWeights(path, c, &tokenizer).ok());
  EXPECT_EQ(tokenizer, "weft-tokenizer char v1\n1\n97\n");
  absl::StatusOr<WeightsFile> f = ReadWeightsFile(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->model.n_head(), 4);
  EXPECT_EQ(f->seq_len, 6);
  EXPECT_EQ(f->tokenizer, "weft-tokenizer char v1\n1\n97\n");
  EXPECT_EQ(f->weights.size(), WeightsOf(c, 5).size());

  absl::StatusOr<WeightsFile> bare =
      ReadWeightsFile(WriteExport("bare2.safetensors", WeightsOf(c, 5), nullptr));
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("records no model"), std::string::npos) << bare.status();
}

// The contents tell the format, not the name (a *.st or *.weights file of
// safetensors got llm.c's "starts with magic 3744").
TEST(WeightsFileTest, SafetensorsUnderAnyName) {
  const GptConfig c = Tiny();
  const std::string path = WriteExport("weights.st", WeightsOf(c, 5), &c);
  EXPECT_TRUE(IsSafetensorsFile(path));
  absl::StatusOr<GptWeights> got = ReadInitWeights(path, c);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), WeightsOf(c, 5).size());
}

TEST(WeightsFileTest, OtherFilesAreLlmcFiles) {
  const GptConfig c = Tiny();
  const std::string path = TempPath("w.bin");
  ASSERT_TRUE(WriteLlmcCheckpoint(path, c, WeightsOf(c, 5)).ok());
  EXPECT_FALSE(IsSafetensorsFile(path));
  absl::StatusOr<WeightsFile> f = ReadWeightsFile(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->seq_len, c.max_seq_len());
  EXPECT_TRUE(ReadInitWeights(path, c).ok());
}

}  // namespace
}  // namespace weft
