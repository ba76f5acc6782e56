#include "data/char_tokenizer.h"

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

TEST(CharTokenizerTest, VocabularyIsTheSortedCharactersOfTheCorpus) {
  auto tok = CharTokenizer::Build("hello world");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 8);  // ' ', d, e, h, l, o, r, w
  EXPECT_EQ(*(*tok)->Encode("hello"), (std::vector<int32_t>{3, 2, 4, 4, 5}));
  EXPECT_EQ((*tok)->eot_id(), -1);
}

TEST(CharTokenizerTest, RoundTripsUtf8AndInvalidBytesExactly) {
  const std::string corpus = *ReadFileToString(testing::TestdataPath("sample.txt")) +
                             std::string("\xFF\xC3(\x00\xE2\x82", 7);
  auto tok = CharTokenizer::Build(corpus);
  ASSERT_TRUE(tok.ok());
  auto ids = (*tok)->Encode(corpus);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*(*tok)->Decode(*ids), corpus);
  // "東" is one character (one id), not three bytes.
  EXPECT_EQ((*tok)->Encode("東")->size(), 1u);
}

TEST(CharTokenizerTest, UnknownCharacterFailsWithItsPosition) {
  auto tok = CharTokenizer::Build("abc");
  auto ids = (*tok)->Encode("abz");
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(ids.status().message(), HasSubstr("'z'"));
  EXPECT_THAT(ids.status().message(), HasSubstr("byte offset 2"));
  EXPECT_THAT(ids.status().message(), HasSubstr("bpe"));
}

TEST(CharTokenizerTest, EmptyCorpusIsAnError) {
  auto tok = CharTokenizer::Build("");
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("empty corpus"));
}

TEST(CharTokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  auto tok = CharTokenizer::Build("ab");
  EXPECT_FALSE((*tok)->Decode(std::vector<int32_t>{0, 2}).ok());
  EXPECT_FALSE((*tok)->Decode(std::vector<int32_t>{-1}).ok());
}

TEST(CharTokenizerTest, SaveAndLoadThroughTheFactory) {
  const std::string corpus = "To be, or not to be: café!";
  auto tok = CharTokenizer::Build(corpus);
  const std::string path = JoinPath(testing::MakeTempDir("char"), "tokenizer.txt");
  ASSERT_TRUE((*tok)->Save(path).ok());
  auto loaded = LoadTokenizer(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->kind(), "char");
  EXPECT_EQ((*loaded)->vocab_size(), (*tok)->vocab_size());
  EXPECT_EQ(*(*loaded)->Encode(corpus), *(*tok)->Encode(corpus));
}

TEST(CharTokenizerTest, CorruptFilesAreRejected) {
  EXPECT_FALSE(ParseTokenizer("weft-tokenizer char v1\n3\n97\n98\n", "f").ok());   // count
  EXPECT_FALSE(ParseTokenizer("weft-tokenizer char v1\n2\n98\n97\n", "f").ok());   // order
  EXPECT_FALSE(ParseTokenizer("weft-tokenizer char v1\n1\n55296\n", "f").ok());    // surrogate
  auto bad = ParseTokenizer("hello\n", "x.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not a weft tokenizer file"));
}

// Other formats are named, and a binary file's bytes are escaped (a NUL
// cut the message short, and raw bytes reached the terminal).
TEST(CharTokenizerTest, ForeignTokenizerFilesAreNamed) {
  // A truncated llm.c tokenizer file is named as one (a whole one decodes:
  // llmc_tokenizer_test).
  const std::string llmc("\xc8\xd7\x34\x01\x00\x00\x00\x00rest", 12);
  absl::Status s = ParseTokenizer(llmc, "gpt2_tokenizer.bin").status();
  EXPECT_NE(s.message().find("llm.c's gpt2_tokenizer.bin"), std::string::npos) << s;
  EXPECT_NE(s.message().find("under its header"), std::string::npos) << s;
  // Another binary file: its bytes escaped, the message whole past the NUL.
  const std::string binary("\x7f\x45\x4c\x46\x00\x01rest", 10);
  s = ParseTokenizer(binary, "a.out").status();
  EXPECT_NE(s.message().find("\\x7fELF\\x00"), std::string::npos) << s;
  EXPECT_NE(s.message().find("expected"), std::string::npos) << s;  // not cut at the NUL
  EXPECT_EQ(std::string(s.message()).find('\0'), std::string::npos);
  // A tokenizer.json is read when it is GPT-2's scheme, else named.
  s = ParseTokenizer("{\"version\": \"1.0\", \"model\": {}}", "tokenizer.json").status();
  EXPECT_NE(s.message().find("Hugging Face tokenizer.json"), std::string::npos) << s;
  EXPECT_NE(s.message().find("not BPE"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft::data
