#include "data/token_window_dataset.h"

#include <numeric>
#include <string>
#include <vector>

#include "data/file_util.h"
#include "data/test_util.h"
#include "data/token_shard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;

std::vector<int32_t> Iota(int n, int start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(TokenWindowDatasetTest, SamplesAreShiftedWindowsThatStayInsideEachShard) {
  const std::string dir = testing::MakeTempDir("windows");
  // 10 tokens with T=4 -> windows [0,5) and [4,9); 7 tokens -> [0,5).
  ASSERT_TRUE(WriteTokenShard(JoinPath(dir, "a.bin"), Iota(10), {.vocab_size = 200}).ok());
  ASSERT_TRUE(WriteTokenShard(JoinPath(dir, "b.bin"), Iota(7, 100), {.vocab_size = 200}).ok());
  auto ds = TokenWindowDataset::OpenShards({JoinPath(dir, "a.bin"), JoinPath(dir, "b.bin")},
                                           {.seq_len = 4});
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->num_samples(), 3);
  EXPECT_EQ((*ds)->vocab_size(), 200);  // from the shard headers
  ASSERT_EQ((*ds)->fields().size(), 2u);
  EXPECT_EQ((*ds)->fields()[0].name, "inputs");
  EXPECT_EQ((*ds)->fields()[0].dtype, DType::kI32);
  EXPECT_EQ((*ds)->fields()[1].shape, (Shape{4}));

  const std::vector<std::vector<int32_t>> want_inputs = {
      {0, 1, 2, 3}, {4, 5, 6, 7}, {100, 101, 102, 103}};
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> x(4), y(4);
    void* dst[2] = {x.data(), y.data()};
    ASSERT_TRUE((*ds)->Fill(i, dst).ok());
    EXPECT_EQ(x, want_inputs[i]);
    for (int t = 0; t < 4; ++t) EXPECT_EQ(y[t], x[t] + 1);
  }
}

TEST(TokenWindowDatasetTest, TokenAboveTheModelVocabularyFailsWithTheFileName) {
  const std::string dir = testing::MakeTempDir("windows");
  std::vector<int32_t> tokens = Iota(9);
  tokens[6] = 500;
  const std::string path = JoinPath(dir, "bad_train.bin");
  ASSERT_TRUE(WriteTokenShard(path, tokens).ok());  // vocab unknown in the header
  auto ds = TokenWindowDataset::OpenShards({path}, {.seq_len = 4, .vocab_size = 50});
  ASSERT_TRUE(ds.ok());
  std::vector<int32_t> x(4), y(4);
  void* dst[2] = {x.data(), y.data()};
  EXPECT_TRUE((*ds)->Fill(0, dst).ok());
  absl::Status s = (*ds)->Fill(1, dst);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("bad_train.bin"));
  EXPECT_THAT(s.message(), HasSubstr("token id 500 at position 6"));
}

TEST(TokenWindowDatasetTest, ShardVocabularyLargerThanTheModelIsRejectedAtOpen) {
  auto b = TokenBuffer::FromTokens("mem", Iota(20), 1000);
  auto ds = TokenWindowDataset::Create({*b}, {.seq_len = 4, .vocab_size = 100});
  ASSERT_FALSE(ds.ok());
  EXPECT_THAT(ds.status().message(), HasSubstr("vocabulary of 1000"));
}

TEST(TokenWindowDatasetTest, TooFewTokensForOneSequence) {
  auto b = TokenBuffer::FromTokens("tiny.bin", Iota(4), 10);
  auto ds = TokenWindowDataset::Create({*b}, {.seq_len = 4});
  ASSERT_FALSE(ds.ok());
  EXPECT_THAT(ds.status().message(), HasSubstr("tiny.bin"));
  EXPECT_THAT(ds.status().message(), HasSubstr("seq_len + 1 = 5"));
  EXPECT_FALSE(TokenWindowDataset::Create({}, {.seq_len = 4}).ok());
  EXPECT_FALSE(TokenWindowDataset::Create({*b}, {.seq_len = 0}).ok());
}

}  // namespace
}  // namespace weft::data
