#include "core/runtime/json_value.h"

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

}  // namespace
}  // namespace weft
