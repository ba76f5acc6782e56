#include "data/bpe_tokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "data/bpe_trainer.h"
#include "data/file_util.h"
#include "data/test_util.h"
#include "data/tokenizer_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;

std::string Corpus() { return *ReadFileToString(testing::TestdataPath("sample.txt")); }

TEST(BpeTokenizerTest, TrainsTheRequestedVocabularyAndCompresses) {
  const std::string corpus = Corpus();
  auto tok = TrainBpe(corpus, {.vocab_size = 400});
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 400);
  EXPECT_EQ((*tok)->num_merges(), 400 - 257);
  EXPECT_EQ((*tok)->eot_id(), 399);
  auto ids = (*tok)->Encode(corpus);
  ASSERT_TRUE(ids.ok());
  EXPECT_LT(ids->size(), corpus.size() / 2);
  EXPECT_EQ(*(*tok)->Decode(*ids), corpus);
  // Frequent words of the corpus become single tokens.
  EXPECT_EQ((*tok)->Encode(" the")->size(), 1u);
}

TEST(BpeTokenizerTest, FirstMergeIsTheMostFrequentPair) {
  auto tok = TrainBpe("aaab aaab aaab", {.vocab_size = 258});
  ASSERT_TRUE(tok.ok()) << tok.status();
  // Chunks "aaab" x1 and " aaab" x2: (a,a) occurs 6 times, more than any other pair.
  EXPECT_EQ((*tok)->merges()[0], (BpeMerge{'a', 'a'}));
}

TEST(BpeTokenizerTest, RoundTripsArbitraryBytes) {
  auto tok = TrainBpe(Corpus(), {.vocab_size = 300});
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::string s(rng() % 500, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    auto ids = (*tok)->Encode(s);
    ASSERT_TRUE(ids.ok());
    ASSERT_EQ(*(*tok)->Decode(*ids), s);
  }
  // Text that looks like the special token is plain bytes, not end-of-text.
  auto ids = (*tok)->Encode("<|endoftext|>");
  for (int32_t id : *ids) EXPECT_NE(id, (*tok)->eot_id());
  EXPECT_EQ(*(*tok)->Decode(std::vector<int32_t>{(*tok)->eot_id()}), "<|endoftext|>");
}

TEST(BpeTokenizerTest, EncodingIsIndependentOfHowTheTextIsCut) {
  const std::string corpus = Corpus();
  auto tok = TrainBpe(corpus, {.vocab_size = 350});
  auto whole = (*tok)->Encode(corpus);
  // Encoding reproduces training's segmentation chunk by chunk, and the
  // chunk cache must not change results.
  auto twice = (*tok)->Encode(corpus + corpus);
  ASSERT_EQ(twice->size(), 2 * whole->size());
  EXPECT_TRUE(std::equal(whole->begin(), whole->end(), twice->begin() + whole->size()));
}

TEST(BpeTokenizerTest, TrainingIsDeterministic) {
  const std::string corpus = Corpus();
  auto a = TrainBpe(corpus, {.vocab_size = 320});
  auto b = TrainBpe(corpus, {.vocab_size = 320});
  EXPECT_EQ((*a)->Serialize(), (*b)->Serialize());
}

TEST(BpeTokenizerTest, SaveAndLoadGiveTheSameIds) {
  const std::string corpus = Corpus();
  auto tok = TrainBpe(corpus, {.vocab_size = 330});
  const std::string path = JoinPath(testing::MakeTempDir("bpe"), "tokenizer.txt");
  ASSERT_TRUE((*tok)->Save(path).ok());
  auto loaded = LoadTokenizer(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->kind(), "bpe");
  EXPECT_EQ((*loaded)->vocab_size(), 330);
  EXPECT_EQ(*(*loaded)->Encode(corpus), *(*tok)->Encode(corpus));
}

TEST(BpeTokenizerTest, BadInputsGetClearErrors) {
  auto empty = TrainBpe("", {.vocab_size = 300});
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("empty corpus"));

  auto tiny = TrainBpe("abcabc", {.vocab_size = 1000});
  ASSERT_FALSE(tiny.ok());
  EXPECT_THAT(tiny.status().message(), HasSubstr("supports only"));

  EXPECT_FALSE(TrainBpe("abc", {.vocab_size = 100}).ok());
  EXPECT_FALSE(BpeTokenizer::FromMerges({{256, 1}}).ok());         // id from the future
  EXPECT_FALSE(BpeTokenizer::FromMerges({{1, 2}, {1, 2}}).ok());   // repeated pair
  EXPECT_FALSE(ParseTokenizer("weft-tokenizer bpe v1\n2 merges\n97 98\n", "f").ok());
  EXPECT_FALSE(ParseTokenizer("weft-tokenizer bpe v1\n1 merges\n97 x\n", "f").ok());

  auto tok = BpeTokenizer::FromMerges({{'a', 'b'}});
  EXPECT_FALSE((*tok)->Decode(std::vector<int32_t>{258}).ok());
}

TEST(BpeTokenizerTest, BuildTokenizerParsesSpecs) {
  const std::string corpus = Corpus();
  std::vector<absl::string_view> docs = {corpus};
  auto bpe = BuildTokenizer("bpe:300", docs);
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  EXPECT_EQ((*bpe)->vocab_size(), 300);
  EXPECT_FALSE(BuildTokenizer("bpe:x", docs).ok());
  EXPECT_FALSE(BuildTokenizer("wordpiece", docs).ok());
}

}  // namespace
}  // namespace weft::data
