// GPT-2's pre-tokenization rule, case by case against the chunks its regex
// gives (worked by hand from the pattern; the end-to-end check against
// Hugging Face's tokenizers is gpt2_tokenizer_test).
#include "data/gpt2_pretokenizer.h"

#include <string>
#include <vector>

#include "data/unicode_classes.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

std::vector<std::string> Chunks(const std::string& text) {
  std::vector<std::string> out;
  ForEachGpt2Chunk(text, [&](absl::string_view c) { out.emplace_back(c); });
  return out;
}

using V = std::vector<std::string>;

TEST(Gpt2PretokenizerTest, WordsTakeOneLeadingSpace) {
  EXPECT_EQ(Chunks("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(Chunks("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(Chunks("a   b"), (V{"a", "  ", " b"}));
}

TEST(Gpt2PretokenizerTest, ContractionsAreTheirOwnChunks) {
  EXPECT_EQ(Chunks("don't we'll I'd they're"),
            (V{"don", "'t", " we", "'ll", " I", "'d", " they", "'re"}));
  EXPECT_EQ(Chunks("'S"), (V{"'", "S"}));  // case-sensitive, as GPT-2's
  EXPECT_EQ(Chunks(" 's"), (V{" '", "s"}));
}

TEST(Gpt2PretokenizerTest, NumbersSymbolsAndWhitespace) {
  EXPECT_EQ(Chunks("abc123 4.5"), (V{"abc", "123", " 4", ".", "5"}));
  EXPECT_EQ(Chunks("hi!!  ?"), (V{"hi", "!!", " ", " ?"}));
  EXPECT_EQ(Chunks("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Chunks("a \n b"), (V{"a", " \n", " b"}));
  EXPECT_EQ(Chunks("end  "), (V{"end", "  "}));  // at the end: the whole run
  EXPECT_EQ(Chunks(" "), (V{" "}));
}

TEST(Gpt2PretokenizerTest, UnicodeClasses) {
  // Letters of any script, numbers of any script, symbols apart.
  EXPECT_EQ(Chunks("café 東京 ١٢٣ ½—x"), (V{"café", " 東京", " ١٢٣", " ½", "—", "x"}));
  EXPECT_TRUE(IsLetter(U'é'));
  EXPECT_TRUE(IsLetter(U'東'));
  EXPECT_TRUE(IsNumber(U'½'));
  EXPECT_FALSE(IsLetter(U'—'));
  EXPECT_TRUE(IsWhiteSpace(U'\u3000'));
  // An invalid byte is a symbol, and chunks still cover the text.
  const std::string bad = "a\xff\xfe b";
  EXPECT_EQ(Chunks(bad), (V{"a", "\xff\xfe", " b"}));
}

}  // namespace
}  // namespace weft::data
