#include "tools/prepare_data/prepare_data.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "data/data.h"
#include "data/file_util.h"
#include "data/token_buffer.h"
#include "data/tokenizer_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::tools {
namespace {

using ::testing::HasSubstr;

const char kSample[] = "data/testdata/sample.txt";

std::string TempDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;  // PrepareData creates it
}

std::vector<int32_t> ReadShard(const std::string& path) {
  return *data::TokenBuffer::OpenShard(path)->ReadAll();
}

TEST(PrepareDataTest, CharShardsDecodeBackToTheInput) {
  PrepareOptions options;
  options.inputs = {kSample};
  options.out_dir = TempDir("char");
  options.tokenizer = "char";
  auto summary = PrepareData(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_GT(summary->val_tokens, 0);
  auto tok = data::LoadTokenizer(data::JoinPath(options.out_dir, "tokenizer.txt"));
  ASSERT_TRUE(tok.ok());
  const std::vector<int32_t> train = ReadShard(data::JoinPath(options.out_dir, "train_000000.bin"));
  const std::vector<int32_t> val = ReadShard(data::JoinPath(options.out_dir, "val_000000.bin"));
  EXPECT_EQ(*(*tok)->Decode(train) + *(*tok)->Decode(val), *data::ReadFileToString(kSample));

  // The directory is what the training loader reads.
  data::TextDataOptions open;
  open.path = options.out_dir;
  open.seq_len = 16;
  open.loader.batch_size = 2;
  auto loaded = data::OpenTextData(open);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->vocab_size, summary->vocab_size);
  EXPECT_NE(loaded->val, nullptr);
}

TEST(PrepareDataTest, BpeShardsStartWithEndOfTextAndRoundTrip) {
  PrepareOptions options;
  options.inputs = {kSample};
  options.out_dir = TempDir("bpe");
  options.tokenizer = "bpe:300";
  options.val_fraction = 0;
  auto summary = PrepareData(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->vocab_size, 300);
  EXPECT_EQ(summary->val_tokens, 0);
  EXPECT_FALSE(data::FileExists(data::JoinPath(options.out_dir, "val_000000.bin")));
  auto tok = data::LoadTokenizer(data::JoinPath(options.out_dir, "tokenizer.txt"));
  std::vector<int32_t> train = ReadShard(data::JoinPath(options.out_dir, "train_000000.bin"));
  ASSERT_EQ(train[0], (*tok)->eot_id());
  train.erase(train.begin());
  EXPECT_EQ(*(*tok)->Decode(train), *data::ReadFileToString(kSample));
}

// --tokenizer=hf:DIR: a Hugging Face model directory's tokenizer.json (here
// Llama 3's scheme); the shards hold its ids, and its form is kept beside them.
TEST(PrepareDataTest, HuggingFaceTokenizerDirectory) {
  PrepareOptions options;
  options.inputs = {kSample};
  options.out_dir = TempDir("hf");
  options.tokenizer = "hf:data/testdata/gpt2_tok/llama3";
  options.val_fraction = 0;
  auto summary = PrepareData(options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->vocab_size, 1004);
  auto hf = data::LoadTokenizer("data/testdata/gpt2_tok/llama3/tokenizer.json");
  ASSERT_TRUE(hf.ok()) << hf.status();
  std::vector<int32_t> train = ReadShard(data::JoinPath(options.out_dir, "train_000000.bin"));
  ASSERT_EQ(train[0], (*hf)->eot_id());  // <|end_of_text|> before the document
  train.erase(train.begin());
  EXPECT_EQ(train, *(*hf)->Encode(*data::ReadFileToString(kSample)));
  auto saved = data::LoadTokenizer(data::JoinPath(options.out_dir, "tokenizer.txt"));
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ((*saved)->Serialize(), (*hf)->Serialize());
}

TEST(PrepareDataTest, SplitsIntoShardsAndReplacesOldOnes) {
  PrepareOptions options;
  options.inputs = {kSample};
  options.out_dir = TempDir("sharded");
  options.shard_tokens = 100;
  auto many = PrepareData(options);
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_TRUE(data::FileExists(data::JoinPath(options.out_dir, "train_000003.bin")));
  options.shard_tokens = 1'000'000;
  ASSERT_TRUE(PrepareData(options).ok());
  EXPECT_FALSE(data::FileExists(data::JoinPath(options.out_dir, "train_000003.bin")))
      << "a rerun must not leave stale shards for the loader to pick up";
}

TEST(PrepareDataTest, ReusesAnExistingTokenizerFile) {
  PrepareOptions first;
  first.inputs = {kSample};
  first.out_dir = TempDir("first");
  ASSERT_TRUE(PrepareData(first).ok());
  PrepareOptions second = first;
  second.out_dir = TempDir("second");
  second.tokenizer = data::JoinPath(first.out_dir, "tokenizer.txt");
  ASSERT_TRUE(PrepareData(second).ok());
  EXPECT_EQ(*data::ReadFileToString(data::JoinPath(second.out_dir, "tokenizer.txt")),
            *data::ReadFileToString(second.tokenizer));
}

TEST(PrepareDataTest, BadInputsGetClearErrors) {
  const std::string dir = TempDir("bad");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(data::WriteFileAtomically(dir + "/empty.txt", "").ok());
  PrepareOptions options;
  options.inputs = {dir + "/empty.txt"};
  options.out_dir = dir + "/out";
  auto empty = PrepareData(options);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("empty corpus"));

  options.inputs = {kSample};
  options.out_dir = "";
  EXPECT_FALSE(PrepareData(options).ok());
  options.out_dir = dir + "/out";
  options.tokenizer = "sentencepiece";
  auto unknown = PrepareData(options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);  // taken as a file path
}

// A shard size that cannot hold a token used to become 1 token per shard
// (a file per token, none long enough for a training window); an input
// directory that is also the output made a rerun read the previous run's
// tokenizer.txt and binary shards as text.
TEST(PrepareDataTest, RefusesBadShardSizesAndItsOwnOutputAsInput) {
  PrepareOptions options;
  options.inputs = {kSample};
  options.out_dir = TempDir("shard_sizes");
  for (int64_t bad : {int64_t{0}, int64_t{-5}, int64_t{1} << 31}) {
    options.shard_tokens = bad;
    auto refused = PrepareData(options);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("--shard_tokens="));
  }
  EXPECT_FALSE(data::FileExists(data::JoinPath(options.out_dir, "train_000000.bin")));

  const std::string dir = TempDir("in_place");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(data::WriteFileAtomically(dir + "/a.txt", *data::ReadFileToString(kSample)).ok());
  PrepareOptions in_place;
  in_place.inputs = {dir};
  in_place.out_dir = dir + "/";
  auto same = PrepareData(in_place);
  EXPECT_EQ(same.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(same.status().message(), HasSubstr("is the output directory"));
}

}  // namespace
}  // namespace weft::tools
