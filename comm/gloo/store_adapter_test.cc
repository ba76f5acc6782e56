#include "comm/gloo/store_adapter.h"

#include <gloo/common/error.h>

#include <memory>

#include "absl/strings/match.h"
#include "comm/store/hash_store.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

TEST(GlooStoreAdapterTest, RoundTripsBytes) {
  auto store = std::make_shared<HashStore>();
  GlooStoreAdapter adapter(store, absl::Seconds(1));
  adapter.set("k", {'a', '\0', 'b'});
  EXPECT_EQ(adapter.get("k"), (std::vector<char>{'a', '\0', 'b'}));
  EXPECT_EQ(*store->Get("k"), std::string("a\0b", 3));
  adapter.wait({"k"});
}

TEST(GlooStoreAdapterTest, TimeoutsThrowIoExceptionNamingTheKey) {
  auto store = std::make_shared<HashStore>();
  GlooStoreAdapter adapter(store, absl::Milliseconds(20));
  try {
    adapter.wait({"3"}, std::chrono::milliseconds(20));
    FAIL() << "wait should have thrown";
  } catch (const ::gloo::IoException& e) {
    EXPECT_TRUE(absl::StrContains(e.what(), "[3]")) << e.what();
  }
  EXPECT_THROW(adapter.get("missing"), ::gloo::IoException);
}

}  // namespace
}  // namespace weft::comm
