#include "data/text_corpus.h"

#include <string>
#include <vector>

#include "data/file_util.h"
#include "data/test_util.h"
#include "data/tokenizer_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;

TEST(TextCorpusTest, ReadsFilesAndRejectsAnEmptyCorpus) {
  const std::string dir = testing::MakeTempDir("corpus");
  ASSERT_TRUE(WriteFileAtomically(JoinPath(dir, "empty.txt"), "").ok());
  auto docs = ReadTextDocuments({JoinPath(dir, "empty.txt")});
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.status().message(), HasSubstr("empty corpus"));
  auto missing = ReadTextDocuments({JoinPath(dir, "missing.txt")});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.txt"));
  auto ok = ReadTextDocuments({testing::TestdataPath("sample.txt")});
  ASSERT_TRUE(ok.ok());
  EXPECT_GT((*ok)[0].text.size(), 100u);
}

TEST(TextCorpusTest, SplitKeepsEveryByteAndCutsAtASafePoint) {
  std::vector<TextDocument> docs = {{"a", "one two three four five six seven eight nine ten"},
                                    {"b", "alpha beta gamma delta"}};
  auto split = SplitTrainVal(docs, 0.25);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->train.size(), 2u);
  ASSERT_EQ(split->val.size(), 2u);
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(std::string(split->train[d]) + std::string(split->val[d]), docs[d].text);
    EXPECT_EQ(split->val[d][0], ' ');  // starts at whitespace after a word
  }
  EXPECT_EQ(split->val[0], " nine ten");
  auto none = SplitTrainVal(docs, 0.0);
  EXPECT_TRUE(none->val.empty());
  EXPECT_FALSE(SplitTrainVal(docs, 1.0).ok());
}

// Text without whitespace after the cut (CJK, or a corpus with no spaces)
// used to get no validation split at all; it is cut at the fraction, on a
// character boundary.
TEST(TextCorpusTest, TextWithoutWhitespaceStillSplits) {
  const std::string letters(100, 'a');
  std::string cjk;
  for (int i = 0; i < 40; ++i) cjk += "\xe4\xb8\xad";  // U+4E2D, three bytes each
  // A file ends with a newline: the only whitespace split point.
  std::vector<TextDocument> docs = {{"a", letters}, {"b", cjk}, {"c", cjk + "\n"}};
  auto split = SplitTrainVal(docs, 0.2);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->val.size(), 3u);
  EXPECT_EQ(split->val[0].size(), 20u);
  EXPECT_GT(split->val[2].size(), 20u) << "only the final newline went to validation";
  EXPECT_EQ(std::string(split->train[1]) + std::string(split->val[1]), cjk);
  EXPECT_EQ(split->val[1].size() % 3, 0u) << "cut inside a character";
  EXPECT_NEAR(static_cast<double>(split->val[1].size()), 0.2 * cjk.size(), 3);
}

TEST(TextCorpusTest, EncodingPrependsEndOfTextAndMatchesWholeEncoding) {
  const std::string text = *ReadFileToString(testing::TestdataPath("sample.txt"));
  std::vector<absl::string_view> docs = {text, text};
  auto bpe = BuildTokenizer("bpe:300", docs);
  ASSERT_TRUE(bpe.ok());
  std::vector<int32_t> ids;
  int calls = 0;
  ASSERT_TRUE(EncodeDocuments(**bpe, docs, &ids, [&](int64_t done, int64_t total) {
                ++calls;
                EXPECT_LE(done, total);
              }).ok());
  const std::vector<int32_t> one = *(*bpe)->Encode(text);
  ASSERT_EQ(ids.size(), 2 * (one.size() + 1));
  EXPECT_EQ(ids[0], (*bpe)->eot_id());
  EXPECT_EQ(ids[one.size() + 1], (*bpe)->eot_id());
  EXPECT_TRUE(std::equal(one.begin(), one.end(), ids.begin() + 1));
  EXPECT_EQ(calls, 2);

  auto chars = BuildTokenizer("char", docs);
  std::vector<int32_t> char_ids;
  ASSERT_TRUE(EncodeDocuments(**chars, docs, &char_ids).ok());
  EXPECT_EQ(*(*chars)->Decode(char_ids), text + text);  // no separator for char-level
}

}  // namespace
}  // namespace weft::data
