#include "checkpoint/safetensors.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace weft::ckpt {
namespace {

std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string U64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

std::string F32Bytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) s.append(reinterpret_cast<const char*>(&v), 4);
  return s;
}

// A file from a hand-written header and buffer, so each test breaks exactly
// one rule of the format.
std::string RawFile(const std::string& name, const std::string& json, const std::string& buffer) {
  const std::string path = TempPath(name);
  Spit(path, U64(json.size()) + json + buffer);
  return path;
}

// Reads `path` and returns the error message (empty when it loaded).
std::string ReadError(const std::string& path) {
  absl::StatusOr<SafetensorsFile> f = ReadSafetensors(path);
  if (f.ok()) return "";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  return std::string(f.status().message());
}

// Byte-for-byte what the spec prescribes for one F32 tensor and metadata:
// the 79-byte JSON below is padded with one space to N = 80, so that the
// buffer starts at 8 + 80 = 88, a multiple of 8.
TEST(SafetensorsTest, GoldenBytesMatchTheSpec) {
  const std::string path = TempPath("golden.safetensors");
  ASSERT_TRUE(
      WriteSafetensors(path, {{"a", {{2}, {1.0f, -2.0f}}}}, {.metadata = {{"k", "v"}}}).ok());
  const std::string json =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(json.size(), 79u);
  const std::string expected = std::string("\x50\0\0\0\0\0\0\0", 8) + json + " " +
                               std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);
  EXPECT_EQ(Slurp(path), expected);
  for (const auto& entry : std::filesystem::directory_iterator(std::getenv("TEST_TMPDIR"))) {
    EXPECT_EQ(entry.path().filename().string().find("golden.safetensors.tmp"), std::string::npos)
        << "temporary file left behind: " << entry.path();
  }
}

TEST(SafetensorsTest, F32RoundTripIsExact) {
  const std::string path = TempPath("f32.safetensors");
  const float denormal = std::numeric_limits<float>::denorm_min();
  std::map<std::string, HostTensor> tensors = {
      {"w", {{2, 3}, {0.1f, -0.0f, 1e30f, denormal, INFINITY, -3.25f}}},
      {"b", {{3}, {1.0f / 3, 2.0f / 3, -7.0f}}},
  };
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  absl::StatusOr<SafetensorsFile> f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors.size(), 2u);
  for (const auto& [name, t] : tensors) {
    const HostTensor& r = f->tensors.at(name);
    EXPECT_EQ(r.shape, t.shape) << name;
    ASSERT_EQ(r.values.size(), t.values.size());
    EXPECT_EQ(std::memcmp(r.values.data(), t.values.data(), 4 * t.values.size()), 0) << name;
  }
  EXPECT_TRUE(f->metadata.empty());
}

TEST(SafetensorsTest, Bf16RoundsToNearestEven) {
  const std::string path = TempPath("bf16.safetensors");
  // bf16 keeps 7 mantissa bits: near 1 its step is 2^-7.
  const float step = 1.0f / 128;
  const std::vector<float> in = {
      1.0f,                           // exact
      1.0f + step / 2,                // tie between 1 (even) and 1 + step: down
      1.0f + 3 * step / 2,            // tie between 1 + step and 1 + 2 step (even): up
      1.0f + step / 2 + 1.0f / 4096,  // above the tie: up
      -2.0f - step / 4,               // below the tie: down in magnitude
  };
  ASSERT_TRUE(WriteSafetensors(path, {{"x", {{5}, in}}}, {.dtype = "BF16"}).ok());
  const std::string bytes = Slurp(path);
  EXPECT_EQ(bytes.size() % 2, 0u);
  // The buffer is 2 bytes per element: 1.0 is 0x3f80 in bf16.
  EXPECT_EQ(bytes.substr(bytes.size() - 10, 2), std::string("\x80\x3f", 2));
  absl::StatusOr<SafetensorsFile> f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->tensors.at("x").values,
            (std::vector<float>{1.0f, 1.0f, 1.0f + 2 * step, 1.0f + step, -2.0f}));
}

TEST(SafetensorsTest, F16RoundTrip) {
  const std::string path = TempPath("f16.safetensors");
  ASSERT_TRUE(
      WriteSafetensors(path, {{"h", {{3}, {0.5f, -1.0f / 1024, 65504.0f}}}}, {.dtype = "F16"})
          .ok());
  absl::StatusOr<SafetensorsFile> f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->tensors.at("h").values, (std::vector<float>{0.5f, -1.0f / 1024, 65504.0f}));
}

TEST(SafetensorsTest, MetadataWithEscapesRoundTrips) {
  const std::string path = TempPath("meta.safetensors");
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"quote\"back\\slash", "line\nbreak\ttab\x01 control"},
      {"utf8", "caf\xc3\xa9"},
  };
  ASSERT_TRUE(WriteSafetensors(path, {{"t", {{1}, {4.0f}}}}, {.metadata = metadata}).ok());
  absl::StatusOr<SafetensorsFile> f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->metadata, metadata);
  EXPECT_NE(Slurp(path).find(R"("quote\"back\\slash":"line\nbreak\ttab\u0001 control")"),
            std::string::npos);
}

TEST(SafetensorsTest, ScalarsEmptyTensorsAndDottedNames) {
  const std::string path = TempPath("odd.safetensors");
  std::map<std::string, HostTensor> tensors = {
      {"model.layers.0:weight", {{2}, {5.0f, 6.0f}}},
      {"scalar", {{}, {3.5f}}},
      {"empty", {{0}, {}}},
      {"empty.2d", {{4, 0}, {}}},
  };
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  absl::StatusOr<SafetensorsFile> f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors.size(), 4u);
  EXPECT_EQ(f->tensors.at("scalar").shape, std::vector<int64_t>{});
  EXPECT_EQ(f->tensors.at("scalar").values, std::vector<float>{3.5f});
  EXPECT_EQ(f->tensors.at("empty.2d").shape, (std::vector<int64_t>{4, 0}));
  EXPECT_TRUE(f->tensors.at("empty").values.empty());
  EXPECT_EQ(f->tensors.at("model.layers.0:weight").values, (std::vector<float>{5.0f, 6.0f}));
  EXPECT_NE(Slurp(path).find(R"("scalar":{"dtype":"F32","shape":[],)"), std::string::npos);
}

TEST(SafetensorsTest, ReadsHandWrittenHeadersWithWhitespaceAndUnicodeEscapes) {
  const std::string path = RawFile(
      "unicode.safetensors",
      "{ \"__metadata__\" : { \"smile\" : \"\\ud83d\\ude00 \\u00e9\\/\" } ,\n"
      "  \"x\" : { \"shape\" : [ 1 ] , \"data_offsets\" : [ 0 , 4 ] , \"dtype\" : \"F32\" } }  ",
      F32Bytes({2.5f}));
  absl::StatusOr<SafetensorsFile> f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->metadata.at("smile"), "\xf0\x9f\x98\x80 \xc3\xa9/");
  EXPECT_EQ(f->tensors.at("x").values, std::vector<float>{2.5f});
}

TEST(SafetensorsTest, TruncatedFilesAreRejected) {
  const std::string good = TempPath("whole.safetensors");
  ASSERT_TRUE(WriteSafetensors(good, {{"a", {{2}, {1, 2}}}, {"b", {{3}, {3, 4, 5}}}}).ok());
  const std::string bytes = Slurp(good);

  const std::string cut_buffer = TempPath("cut_buffer.safetensors");
  Spit(cut_buffer, bytes.substr(0, bytes.size() - 4));
  std::string msg = ReadError(cut_buffer);
  EXPECT_NE(msg.find("tensor 'b' ends at byte 20"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  const std::string cut_header = TempPath("cut_header.safetensors");
  Spit(cut_header, bytes.substr(0, 30));
  msg = ReadError(cut_header);
  EXPECT_NE(msg.find("-byte header in a 30-byte file"), std::string::npos) << msg;

  const std::string tiny = TempPath("tiny.safetensors");
  Spit(tiny, "abc");
  msg = ReadError(tiny);
  EXPECT_NE(msg.find("has 3 bytes"), std::string::npos) << msg;

  absl::Status missing = ReadSafetensors(TempPath("nope.safetensors")).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsTest, BadOffsetsNameTheTensor) {
  const std::string buf = F32Bytes({1, 2, 3});
  auto header = [](const std::string& a, const std::string& b) {
    return absl::StrCat(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)", a,
                        R"(},"b":{"dtype":"F32","shape":[2],"data_offsets":)", b, "}}");
  };
  std::string msg = ReadError(RawFile("overlap.st", header("[0,4]", "[0,8]"), buf + buf));
  EXPECT_NE(msg.find("tensors 'a' and 'b' overlap"), std::string::npos) << msg;
  msg = ReadError(RawFile("hole.st", header("[0,4]", "[8,16]"), buf + F32Bytes({0})));
  EXPECT_NE(msg.find("bytes [4, 8) before tensor 'b' belong to no tensor"), std::string::npos)
      << msg;
  msg = ReadError(RawFile("size.st", header("[0,4]", "[4,8]"), F32Bytes({1, 2})));
  EXPECT_NE(msg.find("tensor 'b' (F32 [2]) has data_offsets [4, 8] = 4 bytes"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("2 elements x 4 bytes = 8"), std::string::npos) << msg;
  msg = ReadError(RawFile("range.st", header("[0,4]", "[4,12]"), F32Bytes({1, 2})));
  EXPECT_NE(msg.find("tensor 'b' ends at byte 12 of the buffer, which has only 8"),
            std::string::npos)
      << msg;
  msg = ReadError(RawFile("trailing.st", header("[0,4]", "[4,12]"), buf + "xyz"));
  EXPECT_NE(msg.find("3 trailing bytes after the last tensor"), std::string::npos) << msg;
  msg = ReadError(RawFile("reversed.st", header("[4,0]", "[4,12]"), buf));
  EXPECT_NE(msg.find("tensor 'a' data_offsets [4, 0]"), std::string::npos) << msg;
}

TEST(SafetensorsTest, MalformedHeadersAreRejected) {
  const std::string buf = F32Bytes({1});
  const std::string ok_entry = R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  struct Case {
    std::string json, expect;
  };
  const std::vector<Case> cases = {
      {"{" + ok_entry, "unterminated object"},
      {"[1]", "not a JSON object"},
      {"{" + ok_entry + "}x", "trailing characters"},
      {"{" + ok_entry + "," + ok_entry + "}", "tensor 'x' appears twice"},
      {R"({"x":{"dtype":"F32","shape":[1]}})", "tensor 'x' lacks \"data_offsets\""},
      {R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
       "tensor 'x' field \"shape\" holds a non-integer or negative entry"},
      {R"({"x":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", "non-integer number"},
      {R"({"x":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})", "leading zero"},
      {R"({"x":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}})",
       "overflows int64"},
      {R"({"x":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", "tensor 'x' dtype is not a string"},
      {R"({"x":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})",
       "tensor 'x' has unknown dtype \"Q4\""},
      {R"({"x":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", "tensor 'x' has dtype I32"},
      {"{\"__metadata__\":{\"k\":1}," + ok_entry + "}", "metadata 'k' is not a string"},
      {"{\"__metadata__\":[]," + ok_entry + "}", "\"__metadata__\" is not an object"},
      {"{\"bad\\q\":1}", "unknown escape '\\q'"},
      {"{\"x\ny\":1}", "raw control character"},
      {"{\"\\ud800x\":1}", "unpaired high surrogate"},
      {"{\"\\udc00\":1}", "lone low surrogate"},
      {std::string(20, '[') + std::string(20, ']'), "nested too deeply"},
      {"", "safetensors header: unexpected end"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string msg = ReadError(RawFile(absl::StrCat("bad", i, ".st"), cases[i].json, buf));
    EXPECT_NE(msg.find(cases[i].expect), std::string::npos)
        << "header " << cases[i].json << "\nmessage: " << msg;
  }
}

TEST(SafetensorsTest, WriterRejectsInconsistentInput) {
  const std::string path = TempPath("never.safetensors");
  absl::Status s = WriteSafetensors(path, {{"w", {{2, 2}, {1, 2, 3}}}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'w' has shape [2, 2] but 3 values"), std::string::npos) << s;
  s = WriteSafetensors(path, {{"w", {{1}, {1}}}}, {.dtype = "F64"});
  EXPECT_NE(s.message().find("\"F64\""), std::string::npos) << s;
  s = WriteSafetensors(path, {{"__metadata__", {{1}, {1}}}});
  EXPECT_NE(s.message().find("rename the tensor"), std::string::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsTest, RewriteReplacesTheOldFile) {
  const std::string path = TempPath("rewrite.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"old", {{1}, {1}}}}).ok());
  ASSERT_TRUE(WriteSafetensors(path, {{"new", {{1}, {2}}}}).ok());
  absl::StatusOr<SafetensorsFile> f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->tensors.count("old"), 0u);
  EXPECT_EQ(f->tensors.at("new").values, std::vector<float>{2});
}

}  // namespace
}  // namespace weft::ckpt
