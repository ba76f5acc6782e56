// A GPT-2-scheme vocabulary that Hugging Face's tokenizers trained
// (testdata/gpt2_tok, make_gpt2_tokenizer_fixture.py), read as tokenizer.json
// and as vocab.json + merges.txt, gives the ids tokenizers gives, on tricky
// texts and on 20000 characters of WikiText-2 with its Unicode; decodes back
// exactly; and survives weft's own serialization (what checkpoints keep).
#include "data/gpt2_tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/json.h"
#include "data/tokenizer_factory.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

std::string Dir() { return std::string(std::getenv("TEST_SRCDIR")) + "/weft/data/testdata/gpt2_tok"; }

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> Expected(const std::string& dir, int64_t* vocab, int32_t* eot) {
  absl::StatusOr<JsonValue> j = ParseJson(Read(dir + "/expected.json"));
  EXPECT_TRUE(j.ok()) << j.status();
  *vocab = static_cast<int64_t>(j->Find("vocab_size")->number);
  *eot = static_cast<int32_t>(j->Find("eot")->number);
  std::vector<Case> out;
  for (const JsonValue& c : j->Find("cases")->array) {
    Case k{c.Find("text")->string, {}};
    for (const JsonValue& id : c.Find("ids")->array) k.ids.push_back(int32_t(id.number));
    out.push_back(std::move(k));
  }
  return out;
}

void ExpectTokenizesLikeHf(const Tokenizer& tok, const std::string& dir = Dir()) {
  int64_t vocab = 0;
  int32_t eot = 0;
  const std::vector<Case> cases = Expected(dir, &vocab, &eot);
  ASSERT_EQ(cases.size(), 13u);
  EXPECT_EQ(tok.vocab_size(), vocab);
  EXPECT_EQ(tok.eot_id(), eot);
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(c.text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c.ids) << "text: " << c.text.substr(0, 80);
    EXPECT_EQ(*tok.Decode(*ids), c.text);
  }
}

uint64_t Fnv1a(const std::vector<int32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t id : ids) {
    for (int b = 0; b < 4; ++b) {
      h = (h ^ ((static_cast<uint32_t>(id) >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    }
  }
  return h;
}

// Every UTF-8 file of Debian's fortunes corpus gives the ids HF gave, token
// for token (their count and hash: the corpus is too big to keep its ids).
void ExpectFortunesLikeHf(const Tokenizer& tok, const std::string& dir) {
  const absl::StatusOr<JsonValue> j = ParseJson(Read(dir + "/expected.json"));
  ASSERT_TRUE(j.ok());
  const JsonValue& f = *j->Find("fortunes");
  std::vector<int32_t> ids;
  for (const JsonValue& name : f.Find("files")->array) {
    const std::string path = f.Find("dir")->string + "/" + name.string;
    const std::string text = Read(path);
    ASSERT_FALSE(text.empty()) << path << " (Debian's fortunes-min; tools/setup.sh installs it)";
    ASSERT_TRUE(tok.EncodeAppend(text, &ids).ok());
  }
  EXPECT_GT(f.Find("files")->array.size(), 1u);
  EXPECT_EQ(static_cast<double>(ids.size()), f.Find("count")->number);
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(Fnv1a(ids)));
  EXPECT_EQ(hash, f.Find("fnv")->string);
}

TEST(Gpt2TokenizerTest, FortunesCorpusGivesHuggingFacesIds) {
  for (const std::string& dir : {Dir(), Dir() + "/llama3"}) {
    SCOPED_TRACE(dir);
    auto tok = LoadTokenizer(dir + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    ExpectFortunesLikeHf(**tok, dir);
  }
}

TEST(Gpt2TokenizerTest, TokenizerJsonGivesHuggingFacesIds) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(Dir() + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->kind(), "gpt2");
  ExpectTokenizesLikeHf(**tok);
}

TEST(Gpt2TokenizerTest, VocabAndMergesGiveHuggingFacesIds) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(Dir() + "/vocab.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectTokenizesLikeHf(**tok);
  // A directory holding them: tokenizer.json first.
  absl::StatusOr<std::unique_ptr<Tokenizer>> dir = LoadTokenizer(Dir());
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ((*dir)->Serialize(), (*tok)->Serialize());
}

TEST(Gpt2TokenizerTest, WeftsSerializationRoundTrips) {
  auto tok = *LoadTokenizer(Dir() + "/tokenizer.json");
  absl::StatusOr<std::unique_ptr<Tokenizer>> again = ParseTokenizer(tok->Serialize(), "saved");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->Serialize(), tok->Serialize());
  ExpectTokenizesLikeHf(**again);
}

TEST(Gpt2TokenizerTest, ItsTokenizerJsonReadsBackToTheSameIds) {
  auto tok = *LoadTokenizer(Dir() + "/tokenizer.json");
  const std::string json = dynamic_cast<const Gpt2Tokenizer&>(*tok).ToTokenizerJson();
  absl::StatusOr<std::unique_ptr<Tokenizer>> again = ParseTokenizer(json, "exported.json");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->Serialize(), tok->Serialize());
}

// Llama 3's scheme: its split pattern, ignore_merges, and special tokens
// after the vocabulary (<|begin_of_text|>, <|end_of_text|> as end-of-text).
TEST(Gpt2TokenizerTest, Llama3SchemeGivesHuggingFacesIds) {
  const std::string dir = Dir() + "/llama3";
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadTokenizer(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectTokenizesLikeHf(**tok, dir);
  // weft's serialization and the tokenizer.json it writes keep the scheme.
  absl::StatusOr<std::unique_ptr<Tokenizer>> again = ParseTokenizer((*tok)->Serialize(), "saved");
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectTokenizesLikeHf(**again, dir);
  const std::string json = dynamic_cast<const Gpt2Tokenizer&>(**tok).ToTokenizerJson();
  absl::StatusOr<std::unique_ptr<Tokenizer>> from_json = ParseTokenizer(json, "exported.json");
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  ExpectTokenizesLikeHf(**from_json, dir);
}

TEST(Gpt2TokenizerTest, OtherSchemesAreRefusedByName) {
  std::string json = Read(Dir() + "/tokenizer.json");
  // The pre-tokenizer comes before the decoder in the file.
  const std::string byte_level = "\"type\": \"ByteLevel\"";
  const size_t at = json.find(byte_level);
  ASSERT_NE(at, std::string::npos);
  std::string split = json;
  split.replace(at, byte_level.size(), "\"type\": \"Split\"");
  absl::StatusOr<std::unique_ptr<Tokenizer>> r = ParseTokenizer(split, "llama3.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the pre_tokenizer is Split"), std::string::npos)
      << r.status();
  std::string prefix = json;
  const std::string no_prefix = "\"add_prefix_space\": false";
  ASSERT_NE(json.find(no_prefix), std::string::npos);
  prefix.replace(json.find(no_prefix), no_prefix.size(), "\"add_prefix_space\": true");
  r = ParseTokenizer(prefix, "prefix.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prefix space"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace weft::data
