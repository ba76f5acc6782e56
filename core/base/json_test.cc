#include "core/base/json.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(JsonValueTest, ParsesNestedValuesInOrder) {
  absl::StatusOr<JsonValue> v =
      ParseJson(R"({"b":1.5e2,"a":[true,false,null,"x\"\n\u00e9"],"o":{"k":-3}} )");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->is_object());
  EXPECT_EQ(v->object[0].first, "b");
  EXPECT_DOUBLE_EQ(v->Find("b")->number, 150);
  const JsonValue* a = v->Find("a");
  ASSERT_TRUE(a->is_array());
  ASSERT_EQ(a->array.size(), 4u);
  EXPECT_TRUE(a->array[0].boolean);
  EXPECT_EQ(a->array[2].kind, JsonValue::Kind::kNull);
  EXPECT_EQ(a->array[3].string, "x\"\n\xc3\xa9");
  EXPECT_DOUBLE_EQ(v->Find("o")->Find("k")->number, -3);
  EXPECT_EQ(v->Find("missing"), nullptr);
}

TEST(JsonValueTest, RejectsMalformedText) {
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "\"open", "1 2", "{\"a\":tru}", ""}) {
    EXPECT_FALSE(ParseJson(bad).ok()) << bad;
  }
}

TEST(JsonValueTest, EscapeRoundTrips) {
  const std::string s = "quote \" back \\ tab \t nl \n bell \x07";
  absl::StatusOr<JsonValue> v = ParseJson("\"" + JsonEscape(s) + "\"");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->string, s);
}

TEST(JsonValueTest, IntegersAreExactBeyondDoubles) {
  absl::StatusOr<JsonValue> v =
      ParseJson("[9007199254740993, -9223372036854775808, 9223372036854775808, 1.0, 1e3, 0, -0]");
  ASSERT_TRUE(v.ok()) << v.status();
  const std::vector<JsonValue>& a = v->array;
  EXPECT_EQ(a[0].AsInt64(), int64_t{9007199254740993});  // 2^53 + 1: a double rounds it
  EXPECT_EQ(a[1].AsInt64(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(a[2].AsInt64(), std::nullopt);
  EXPECT_TRUE(a[2].integer_overflowed());
  EXPECT_DOUBLE_EQ(a[2].number, 9223372036854775808.0);
  EXPECT_EQ(a[3].AsInt64(), std::nullopt);  // a fraction, even if whole
  EXPECT_FALSE(a[3].integer_overflowed());
  EXPECT_EQ(a[4].AsInt64(), std::nullopt);
  EXPECT_EQ(a[5].AsInt64(), 0);
  EXPECT_EQ(a[6].AsInt64(), 0);
}

TEST(JsonValueTest, StrictGrammarNamesWhatIsWrong) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (const Case& c : std::vector<Case>{
           {"[01]", "leading zero"},
           {"[1.]", "'.' without digits"},
           {"[1e]", "exponent without digits"},
           {"[-]", "'-' without digits"},
           {"[.5]", "unexpected character '.'"},
           {"\"a\\q\"", "unknown escape '\\q'"},
           {"\"\\ud800x\"", "unpaired high surrogate"},
           {"\"\\udc00\"", "lone low surrogate"},
           {"\"a\nb\"", "raw control character"},
           {"{\"a\":1", "unterminated object"},
           {"[1", "unterminated array"},
           {"1 2", "trailing characters"},
           {"", "unexpected end"},
       }) {
    absl::StatusOr<JsonValue> v = ParseJson(c.text, {.what = "test doc"});
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_NE(v.status().message().find(c.expect), std::string::npos) << v.status();
    EXPECT_NE(v.status().message().find("test doc: "), std::string::npos) << v.status();
  }
}

TEST(JsonValueTest, SurrogatePairsDecodeToUtf8) {
  absl::StatusOr<JsonValue> v = ParseJson(R"("\ud83d\ude00")");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->string, "\xf0\x9f\x98\x80");
}

TEST(JsonValueTest, DepthLimitIsAnOption) {
  const std::string deep = std::string(20, '[') + std::string(20, ']');
  EXPECT_TRUE(ParseJson(deep).ok());
  absl::StatusOr<JsonValue> v = ParseJson(deep, {.max_depth = 16});
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("nested too deeply"), std::string::npos) << v.status();
}

}  // namespace
}  // namespace weft
