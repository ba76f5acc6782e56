#include "data/pretokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace weft::data {
namespace {

std::vector<std::string> Chunks(absl::string_view text) {
  std::vector<std::string> out;
  ForEachChunk(text, [&](absl::string_view c) { out.emplace_back(c); });
  return out;
}

TEST(PretokenizerTest, SplitsWordsWithTheirLeadingSpace) {
  EXPECT_EQ(Chunks("Hello world, 42 times!\n\nOk"),
            (std::vector<std::string>{"Hello", " world", ",", " 42", " times", "!", "\n\n", "Ok"}));
}

TEST(PretokenizerTest, WhitespaceRunGivesItsLastSpaceToTheNextWord) {
  EXPECT_EQ(Chunks("a   b"), (std::vector<std::string>{"a", "  ", " b"}));
  EXPECT_EQ(Chunks("a \n b"), (std::vector<std::string>{"a", " \n", " b"}));
  EXPECT_EQ(Chunks("a \t"), (std::vector<std::string>{"a", " \t"}));
}

TEST(PretokenizerTest, Utf8StaysInsideWords) {
  EXPECT_EQ(Chunks("café 東京"), (std::vector<std::string>{"café", " 東京"}));
}

TEST(PretokenizerTest, LongRunsAreCappedAndChunksCoverTheInput) {
  const std::string text = std::string(200, 'x') + std::string(100, ' ');
  std::string joined;
  for (const std::string& c : Chunks(text)) {
    EXPECT_LE(c.size(), kMaxChunkBytes);
    joined += c;
  }
  EXPECT_EQ(joined, text);
}

TEST(PretokenizerTest, SafeSplitPointsAreChunkBoundariesOnRandomText) {
  std::mt19937 rng(7);
  const std::string alphabet = "ab1 \n\t.,\xC3\xA9";
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    for (int i = 0; i < 300; ++i) text += alphabet[rng() % alphabet.size()];
    const size_t p = SafeSplitPoint(text, rng() % text.size());
    std::vector<std::string> whole = Chunks(text);
    std::vector<std::string> parts = Chunks(absl::string_view(text).substr(0, p));
    for (const std::string& c : Chunks(absl::string_view(text).substr(p))) parts.push_back(c);
    ASSERT_EQ(parts, whole) << "split at " << p;
  }
}

}  // namespace
}  // namespace weft::data
