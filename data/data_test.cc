#include "data/data.h"

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/file_util.h"
#include "data/idx_file.h"
#include "data/test_util.h"
#include "data/token_shard.h"
#include "data/tokenizer_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;

std::string Decode(const TextData& data, const Tensor& ids) {
  std::vector<int32_t> v(ids.data<int32_t>(), ids.data<int32_t>() + ids.numel());
  return *data.tokenizer->Decode(v);
}

TEST(OpenTextDataTest, CharLevelFromATextFile) {
  TextDataOptions opt;
  opt.path = testing::TestdataPath("sample.txt");
  opt.seq_len = 16;
  opt.loader.batch_size = 2;
  opt.loader.num_workers = 1;
  auto data = OpenTextData(opt);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_NE(data->tokenizer, nullptr);
  EXPECT_EQ(data->tokenizer->kind(), "char");
  EXPECT_EQ(data->vocab_size, data->tokenizer->vocab_size());
  ASSERT_NE(data->val, nullptr);
  const std::string text = *ReadFileToString(opt.path);
  Batch b = *data->train->Next();
  EXPECT_EQ(b.Get("inputs").shape(), (Shape{2, 16}));
  // Every sample is a real 16-character stretch of the file.
  const std::string window = Decode(*data, b.Get("inputs").Slice(0, 0, 1));
  EXPECT_NE(text.find(window), std::string::npos) << window;
  Batch v = *data->val->Next();
  EXPECT_NE(text.find(Decode(*data, v.Get("targets").Slice(0, 1, 2))), std::string::npos);
}

TEST(OpenTextDataTest, BpeSpecTrainsOnTheTrainingSplit) {
  TextDataOptions opt;
  opt.path = testing::TestdataPath("sample.txt");
  opt.tokenizer = "bpe:300";
  opt.seq_len = 8;
  opt.val_fraction = 0.2;
  opt.loader.batch_size = 2;
  auto data = OpenTextData(opt);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->vocab_size, 300);
  EXPECT_TRUE(data->train->Next().ok());
}

// A cache reads and tokenizes the text once: later opens with the same
// files, tokenizer and split take it from there (the file is gone by then),
// with loaders of their own; other options read the files again.
TEST(OpenTextDataTest, ACacheTokenizesTheTextOnce) {
  const std::string path = JoinPath(testing::MakeTempDir("cache"), "cached.txt");
  ASSERT_TRUE(
      WriteFileAtomically(path, *ReadFileToString(testing::TestdataPath("sample.txt"))).ok());
  TextDataOptions opt;
  opt.path = path;
  opt.tokenizer = "bpe:300";
  opt.seq_len = 8;
  opt.loader.batch_size = 2;
  opt.cache = MakeTextSourceCache();
  auto first = OpenTextData(opt);
  ASSERT_TRUE(first.ok()) << first.status();
  std::remove(path.c_str());
  opt.seq_len = 4;  // windows and loaders are made anew from the kept tokens
  opt.loader.batch_size = 3;
  auto again = OpenTextData(opt);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tokenizer->Serialize(), first->tokenizer->Serialize());
  EXPECT_GT(again->train->dataset().num_samples(), first->train->dataset().num_samples());
  Batch b = *again->train->Next();
  EXPECT_EQ(b.Get("inputs").shape(), (Shape{3, 4}));
  opt.val_fraction = 0.2;  // another split: the file is read again (and is gone)
  EXPECT_FALSE(OpenTextData(opt).ok());
}

// What //tools:prepare_data writes: train/val shards and tokenizer.txt.
TEST(OpenTextDataTest, ShardDirectoryWithTokenizer) {
  const std::string dir = testing::MakeTempDir("shards");
  const std::string text = *ReadFileToString(testing::TestdataPath("sample.txt"));
  auto tok = BuildTokenizer("char", {text});
  ASSERT_TRUE((*tok)->Save(JoinPath(dir, "tokenizer.txt")).ok());
  const std::vector<int32_t> ids = *(*tok)->Encode(text);
  const int64_t vocab = (*tok)->vocab_size();
  const std::vector<int32_t> train(ids.begin(), ids.begin() + 400);
  const std::vector<int32_t> val(ids.begin() + 400, ids.end());
  ASSERT_TRUE(WriteTokenShard(JoinPath(dir, "train_000000.bin"), train, {.vocab_size = vocab}).ok());
  ASSERT_TRUE(WriteTokenShard(JoinPath(dir, "val_000000.bin"), val, {.vocab_size = vocab}).ok());

  TextDataOptions opt;
  opt.path = dir;
  opt.seq_len = 32;
  opt.loader.batch_size = 4;
  opt.loader.shuffle = false;
  auto data = OpenTextData(opt);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->vocab_size, vocab);
  ASSERT_NE(data->val, nullptr);
  Batch b = *data->train->Next();
  EXPECT_EQ(Decode(*data, b.Get("inputs").Slice(0, 0, 1)), text.substr(0, 32));
  // A spec that builds a tokenizer from text cannot apply to shards: it was
  // ignored (training went on with the shards' vocabulary).
  opt.tokenizer = "bpe:1024";
  auto refused = OpenTextData(opt);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("--tokenizer=bpe:1024 with token shards"));
}

// A data set whose name contains "val" (or "train") names its splits as
// words: medieval_train_* is training data only, never validation data.
TEST(OpenTextDataTest, SplitNamesAreWordsInShardFileNames) {
  const std::string dir = testing::MakeTempDir("medieval");
  std::vector<int32_t> train(401, 1), val(101, 2);
  const ShardWriteOptions vocab8 = {.vocab_size = 8};
  ASSERT_TRUE(WriteTokenShard(JoinPath(dir, "medieval_train_000000.bin"), train, vocab8).ok());
  ASSERT_TRUE(WriteTokenShard(JoinPath(dir, "medieval_val_000000.bin"), val, vocab8).ok());
  TextDataOptions opt;
  opt.path = dir;
  opt.seq_len = 100;
  opt.loader.batch_size = 1;
  auto data = OpenTextData(opt);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train->dataset().num_samples(), 4);
  ASSERT_NE(data->val, nullptr);
  EXPECT_EQ(data->val->dataset().num_samples(), 1);
  EXPECT_EQ(data->val->Next()->Get("inputs").data<int32_t>()[0], 2);

  ASSERT_TRUE(WriteTokenShard(JoinPath(dir, "extra_train_val.bin"), val, vocab8).ok());
  auto ambiguous = OpenTextData(opt);
  EXPECT_EQ(ambiguous.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ambiguous.status().message(), HasSubstr("extra_train_val.bin' could belong to"));
}

// Shards record their tokenizer's vocabulary size: a directory mixing
// prepare_data outputs, or shards beside another tokenizer, is refused.
TEST(OpenTextDataTest, ShardsOfAnotherTokenizerAreRefused) {
  const std::string text = *ReadFileToString(testing::TestdataPath("sample.txt"));
  auto chars = BuildTokenizer("char", {text});
  auto bpe = BuildTokenizer("bpe:300", {text});
  ASSERT_TRUE(chars.ok() && bpe.ok());
  const std::vector<int32_t> char_ids = *(*chars)->Encode(text);
  const std::vector<int32_t> bpe_ids = *(*bpe)->Encode(text);
  TextDataOptions opt;
  opt.seq_len = 16;
  opt.loader.batch_size = 2;

  // Char shards beside a BPE tokenizer.txt.
  opt.path = testing::MakeTempDir("char_shards_bpe_tokenizer");
  ASSERT_TRUE((*bpe)->Save(JoinPath(opt.path, "tokenizer.txt")).ok());
  ASSERT_TRUE(WriteTokenShard(JoinPath(opt.path, "train_000000.bin"), char_ids,
                              {.vocab_size = (*chars)->vocab_size()}).ok());
  auto wrong_tokenizer = OpenTextData(opt);
  EXPECT_EQ(wrong_tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_tokenizer.status().message(),
              HasSubstr(absl::StrCat("train_000000.bin was written by a tokenizer of ",
                                     (*chars)->vocab_size(), " ids, but the tokenizer '")));

  // Char and BPE shards in one directory (no tokenizer file).
  opt.path = testing::MakeTempDir("mixed_shards");
  ASSERT_TRUE(WriteTokenShard(JoinPath(opt.path, "train_000000.bin"), char_ids,
                              {.vocab_size = (*chars)->vocab_size()}).ok());
  ASSERT_TRUE(WriteTokenShard(JoinPath(opt.path, "train_000001.bin"), bpe_ids,
                              {.vocab_size = 300}).ok());
  auto mixed = OpenTextData(opt);
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.status().message(), HasSubstr("shards of different tokenizers"));
}

TEST(OpenTextDataTest, LlmcShardsNeedAVocabularySize) {
  const std::string dir = testing::MakeTempDir("llmc");
  std::vector<int32_t> ids(300);
  std::iota(ids.begin(), ids.end(), 50000);
  ASSERT_TRUE(WriteTokenShard(JoinPath(dir, "fineweb_train_000001.bin"), ids).ok());
  TextDataOptions opt;
  opt.path = dir;
  opt.seq_len = 64;
  opt.loader.batch_size = 2;
  auto missing = OpenTextData(opt);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("set vocab_size"));
  opt.vocab_size = 50257;
  auto data = OpenTextData(opt);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->tokenizer, nullptr);
  EXPECT_EQ(data->val, nullptr);
  EXPECT_TRUE(data->train->Next().ok());
}

TEST(OpenTextDataTest, BadPathsAreClearErrors) {
  TextDataOptions opt;
  EXPECT_FALSE(OpenTextData(opt).ok());
  opt.path = testing::MakeTempDir("no_shards");
  auto empty_dir = OpenTextData(opt);
  ASSERT_FALSE(empty_dir.ok());
  EXPECT_THAT(empty_dir.status().message(), HasSubstr("*train*.bin"));
  opt.path = "/nonexistent/corpus.txt";
  auto missing = OpenTextData(opt);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(OpenFashionMnistDataTest, TrainAndTestLoaders) {
  const std::string dir = testing::MakeTempDir("fmnist");
  for (const char* split : {"train", "t10k"}) {
    const int n = std::string(split) == "train" ? 20 : 7;
    std::vector<uint8_t> pixels(n * 4 * 4), labels(n);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i);
    for (int i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>(i % 10);
    ASSERT_TRUE(WriteIdxFile(JoinPath(dir, std::string(split) + "-images-idx3-ubyte.gz"),
                             {n, 4, 4}, pixels).ok());
    ASSERT_TRUE(WriteIdxFile(JoinPath(dir, std::string(split) + "-labels-idx1-ubyte.gz"), {n},
                             labels).ok());
  }
  ImageDataOptions opt;
  opt.dir = dir;
  opt.loader.batch_size = 5;
  auto data = OpenFashionMnistData(opt);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_features, 16);
  EXPECT_EQ(data->num_classes, 10);
  EXPECT_EQ(data->train->batches_per_epoch(), 4);
  EXPECT_EQ(data->test->batches_per_epoch(), 2);  // 7 test images: 5 + 2
  Batch b = *data->train->Next();
  EXPECT_EQ(b.Get("image").shape(), (Shape{5, 16}));
  EXPECT_EQ(b.Get("label").shape(), (Shape{5}));
  const int32_t label = b.Get("label").data<int32_t>()[0];
  EXPECT_GE(label, 0);
  EXPECT_LT(label, 10);
  b = *data->test->Next();
  b = *data->test->Next();
  EXPECT_EQ(b.rows(), 2);
}

}  // namespace
}  // namespace weft::data
