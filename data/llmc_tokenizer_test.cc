// llm.c's gpt2_tokenizer.bin, written here in its format: it decodes, keeps
// its end-of-text id (version 2; the last token in version 1), survives
// weft's serialization, refuses to encode text naming what can, and a
// damaged file is named as one.
#include "data/llmc_tokenizer.h"

#include <string>
#include <vector>

#include "data/tokenizer_factory.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

std::string LlmcFile(int version, const std::vector<std::string>& tokens, int eot) {
  std::string out(1024, '\0');
  const auto put = [&](int i, int32_t v) {
    for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<char>((v >> (8 * b)) & 0xff);
  };
  put(0, kLlmcTokenizerMagic);
  put(1, version);
  put(2, static_cast<int32_t>(tokens.size()));
  if (version == 2) put(3, eot);
  for (const std::string& t : tokens) {
    out.push_back(static_cast<char>(t.size()));
    out += t;
  }
  return out;
}

const std::vector<std::string> kTokens = {"Hello", ",", " world", std::string("\0\xff", 2), "",
                                          "<|endoftext|>"};

TEST(LlmcTokenizerTest, DecodesAndRoundTrips) {
  for (int version : {1, 2}) {
    SCOPED_TRACE(version);
    auto tok = ParseTokenizer(LlmcFile(version, kTokens, 5), "gpt2_tokenizer.bin");
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_EQ((*tok)->kind(), "llmc");
    EXPECT_EQ((*tok)->vocab_size(), 6);
    EXPECT_EQ((*tok)->eot_id(), 5);
    EXPECT_EQ(*(*tok)->Decode({0, 1, 2, 5}), "Hello, world<|endoftext|>");
    EXPECT_EQ(*(*tok)->Decode({3}), std::string("\0\xff", 2));
    auto again = ParseTokenizer((*tok)->Serialize(), "saved");
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ((*again)->Serialize(), (*tok)->Serialize());
    // An empty prompt encodes (sampling from end-of-text); text does not.
    EXPECT_TRUE((*tok)->Encode("").ok());
    const absl::Status s = (*tok)->Encode("Hello").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("merges.txt"), std::string::npos) << s;
  }
}

TEST(LlmcTokenizerTest, DamagedFilesAreNamed) {
  std::string cut = LlmcFile(2, kTokens, 5);
  cut.resize(cut.size() - 3);
  absl::Status s = ParseTokenizer(cut, "cut.bin").status();
  EXPECT_NE(s.message().find("runs past the end"), std::string::npos) << s;
  s = ParseTokenizer(LlmcFile(3, kTokens, 5), "v3.bin").status();
  EXPECT_NE(s.message().find("version 3"), std::string::npos) << s;
  s = ParseTokenizer(LlmcFile(2, kTokens, 9), "eot.bin").status();
  EXPECT_NE(s.message().find("end-of-text id 9"), std::string::npos) << s;
}

}  // namespace
}  // namespace weft::data
