#include "data/token_shard.h"

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "data/file_util.h"
#include "data/test_util.h"
#include "data/token_buffer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;

std::string RawShard(int32_t magic, int32_t version, int32_t count, size_t token_bytes) {
  int32_t header[kShardHeaderInts] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
  bytes.append(token_bytes, '\0');
  return bytes;
}

class TokenShardTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) { return JoinPath(dir_, name); }
  std::string dir_ = testing::MakeTempDir("token_shard");
};

TEST_F(TokenShardTest, Uint16RoundTripRecordsVocabAndUsesLlmcLayout) {
  std::vector<int32_t> tokens(1000);
  for (int i = 0; i < 1000; ++i) tokens[i] = (i * 37) % 65;
  const std::string path = Path("a.bin");
  ASSERT_TRUE(WriteTokenShard(path, tokens, {.vocab_size = 65}).ok());

  const std::string bytes = *ReadFileToString(path);
  ASSERT_EQ(bytes.size(), kShardHeaderBytes + 2 * tokens.size());
  int32_t h[4];
  std::memcpy(h, bytes.data(), sizeof(h));
  EXPECT_EQ(h[0], 20240520);
  EXPECT_EQ(h[1], 1);
  EXPECT_EQ(h[2], 1000);
  EXPECT_EQ(h[3], 65);

  auto buffer = TokenBuffer::OpenShard(path);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->width(), TokenWidth::kU16);
  EXPECT_EQ(buffer->vocab_size(), 65);
  EXPECT_EQ(*buffer->ReadAll(65), tokens);
}

TEST_F(TokenShardTest, Uint32RoundTripForLargeVocabularies) {
  std::vector<int32_t> tokens = {0, 65535, 65536, 99999, 12345};
  const std::string path = Path("big.bin");
  ASSERT_TRUE(WriteTokenShard(path, tokens, {.vocab_size = 100000}).ok());
  const std::string bytes = *ReadFileToString(path);
  ASSERT_EQ(bytes.size(), kShardHeaderBytes + 4 * tokens.size());
  int32_t h[2];
  std::memcpy(h, bytes.data(), sizeof(h));
  EXPECT_EQ(h[0], kShardMagicU32);
  EXPECT_EQ(h[1], kShardVersionU32);

  auto buffer = TokenBuffer::OpenShard(path);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->width(), TokenWidth::kU32);
  EXPECT_EQ(*buffer->ReadAll(100000), tokens);
  std::vector<int32_t> window(3);
  ASSERT_TRUE(buffer->Read(1, 3, window.data(), 100000).ok());
  EXPECT_EQ(window, (std::vector<int32_t>{65535, 65536, 99999}));
}

TEST_F(TokenShardTest, ReadsShardsWrittenByLlmc) {
  // llm.c writes header[3] = 0 (no vocabulary) and uint16 GPT-2 ids.
  std::string bytes = RawShard(20240520, 1, 3, 0);
  const uint16_t ids[3] = {50256, 15496, 11};
  bytes.append(reinterpret_cast<const char*>(ids), sizeof(ids));
  ASSERT_TRUE(WriteFileAtomically(Path("llmc.bin"), bytes).ok());
  auto buffer = TokenBuffer::OpenShard(Path("llmc.bin"));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->vocab_size(), 0);
  EXPECT_EQ(*buffer->ReadAll(50257), (std::vector<int32_t>{50256, 15496, 11}));
}

TEST_F(TokenShardTest, WrongMagicNamesFileAndBothMagics) {
  ASSERT_TRUE(WriteFileAtomically(Path("m.bin"), RawShard(12345, 1, 0, 0)).ok());
  auto b = TokenBuffer::OpenShard(Path("m.bin"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("wrong magic 12345"));
  EXPECT_THAT(b.status().message(), HasSubstr("m.bin"));
  EXPECT_THAT(b.status().message(), HasSubstr("20240520"));
  EXPECT_THAT(b.status().message(), HasSubstr("20240801"));
}

TEST_F(TokenShardTest, WrongVersionIsRejected) {
  ASSERT_TRUE(WriteFileAtomically(Path("v.bin"), RawShard(kShardMagicU16, 2, 0, 0)).ok());
  auto b = TokenBuffer::OpenShard(Path("v.bin"));
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("unsupported shard version 2"));
}

TEST_F(TokenShardTest, TruncatedHeader) {
  ASSERT_TRUE(WriteFileAtomically(Path("h.bin"), std::string(100, '\0')).ok());
  auto b = TokenBuffer::OpenShard(Path("h.bin"));
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("truncated shard header"));
  EXPECT_THAT(b.status().message(), HasSubstr("100 bytes"));
}

TEST_F(TokenShardTest, TruncatedTokens) {
  ASSERT_TRUE(WriteFileAtomically(Path("t.bin"), RawShard(kShardMagicU16, 1, 10, 2 * 7)).ok());
  auto b = TokenBuffer::OpenShard(Path("t.bin"));
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("truncated shard"));
  EXPECT_THAT(b.status().message(), HasSubstr("header says 10 tokens"));
  EXPECT_THAT(b.status().message(), HasSubstr("holds only 7"));
}

TEST_F(TokenShardTest, TokenCountMismatchWhenFileIsLonger) {
  ASSERT_TRUE(WriteFileAtomically(Path("c.bin"), RawShard(kShardMagicU16, 1, 4, 2 * 6 + 1)).ok());
  auto b = TokenBuffer::OpenShard(Path("c.bin"));
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("token count mismatch"));
  EXPECT_THAT(b.status().message(), HasSubstr("holds 6"));
  EXPECT_THAT(b.status().message(), HasSubstr("partial token"));
}

TEST_F(TokenShardTest, MissingFileIsNotFound) {
  auto b = TokenBuffer::OpenShard(Path("nope.bin"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(b.status().message(), HasSubstr("nope.bin"));
}

TEST_F(TokenShardTest, WriterRejectsIdsOutsideTheVocabularyAndWritesNothing) {
  const std::vector<int32_t> tokens = {1, 2, 70};
  absl::Status s = WriteTokenShard(Path("bad.bin"), tokens, {.vocab_size = 65});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("token id 70 at position 2"));
  EXPECT_FALSE(FileExists(Path("bad.bin")));
  EXPECT_FALSE(WriteTokenShard(Path("neg.bin"), std::vector<int32_t>{-1}).ok());
}

TEST_F(TokenShardTest, ReadFailsOnIdAtOrAboveLimitWithFileAndPosition) {
  ASSERT_TRUE(WriteTokenShard(Path("r.bin"), std::vector<int32_t>{5, 6, 300, 7}).ok());
  auto b = TokenBuffer::OpenShard(Path("r.bin"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->vocab_size(), 0);
  std::vector<int32_t> out(4);
  absl::Status s = b->Read(0, 4, out.data(), 256);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("token id 300 at position 2"));
  EXPECT_THAT(s.message(), HasSubstr("r.bin"));
  EXPECT_TRUE(b->Read(0, 2, out.data(), 256).ok());
  EXPECT_FALSE(b->Read(2, 5, out.data(), 0).ok());  // past the end
}

TEST_F(TokenShardTest, InMemoryBufferPicksWidthFromVocabulary) {
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5};
  auto small = TokenBuffer::FromTokens("mem", tokens, 10);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->width(), TokenWidth::kU16);
  EXPECT_EQ(*small->ReadAll(10), tokens);
  auto large = TokenBuffer::FromTokens("mem", tokens, 70000);
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->width(), TokenWidth::kU32);
  EXPECT_FALSE(TokenBuffer::FromTokens("mem", tokens, 5).ok());
}

}  // namespace
}  // namespace weft::data
