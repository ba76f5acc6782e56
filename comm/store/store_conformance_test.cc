// One behavioral contract, checked against every Store implementation.
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/store/file_store.h"
#include "comm/store/hash_store.h"
#include "comm/store/prefix_store.h"
#include "comm/store/tcp_store.h"
#include "gtest/gtest.h"

namespace weft::comm {
namespace {

struct StoreFactory {
  std::string name;
  std::function<std::shared_ptr<Store>()> make;
};

std::string TempPath(absl::string_view tag) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/store_", tag, "_", ::getpid(), "_",
                      counter++);
}

std::vector<StoreFactory> Factories() {
  return {
      {"hash", [] { return std::make_shared<HashStore>(absl::Seconds(5)); }},
      {"file",
       [] {
         auto s = FileStore::Create(TempPath("conf"), absl::Seconds(5));
         EXPECT_TRUE(s.ok()) << s.status();
         return std::shared_ptr<Store>(*s);
       }},
      {"tcp",
       [] {
         auto s = TcpStore::Create({.host = "127.0.0.1", .port = 0, .is_server = true,
                                    .world_size = 1, .rank = 0, .timeout = absl::Seconds(5)});
         EXPECT_TRUE(s.ok()) << s.status();
         return std::shared_ptr<Store>(*s);
       }},
      {"prefix",
       [] {
         return std::make_shared<PrefixStore>("pfx",
                                              std::make_shared<HashStore>(absl::Seconds(5)));
       }},
  };
}

class StoreConformanceTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override { store_ = GetParam().make(); }
  std::shared_ptr<Store> store_;
};

TEST_P(StoreConformanceTest, SetThenGet) {
  ASSERT_TRUE(store_->Set("a", "1").ok());
  ASSERT_TRUE(store_->Set("a", "2").ok());
  auto v = store_->Get("a");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "2");
}

TEST_P(StoreConformanceTest, BinaryValuesRoundTrip) {
  const std::string value("\0\x01\xff zero\0end", 12);
  ASSERT_TRUE(store_->Set("bin", value).ok());
  EXPECT_EQ(*store_->Get("bin"), value);
  ASSERT_TRUE(store_->Set("empty", "").ok());
  EXPECT_EQ(*store_->Get("empty"), "");
}

TEST_P(StoreConformanceTest, GetTimesOutNamingTheKey) {
  auto v = store_->Get("never_set", absl::Milliseconds(100));
  ASSERT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "never_set")) << v.status();
}

TEST_P(StoreConformanceTest, GetWaitsForAnotherThread) {
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(store_->Set("late", "here").ok());
  });
  auto v = store_->Get("late", absl::Seconds(5));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "here");
}

TEST_P(StoreConformanceTest, WaitListsOnlyMissingKeys) {
  ASSERT_TRUE(store_->Set("present", "x").ok());
  const std::vector<std::string> keys = {"present", "absent_1", "absent_2"};
  absl::Status s = store_->Wait(keys, absl::Milliseconds(100));
  ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "absent_1")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "absent_2")) << s;
  const std::string message(s.message());
  const std::string missing_part = message.substr(0, message.find("(asked for"));
  EXPECT_FALSE(absl::StrContains(missing_part, "present")) << s;
  ASSERT_TRUE(store_->Set("absent_1", "").ok());
  ASSERT_TRUE(store_->Set("absent_2", "").ok());
  EXPECT_TRUE(store_->Wait(keys, absl::Milliseconds(100)).ok());
}

TEST_P(StoreConformanceTest, AddCountsAndReadsBackAsDecimal) {
  EXPECT_EQ(*store_->Add("n", 3), 3);
  EXPECT_EQ(*store_->Add("n", -5), -2);
  EXPECT_EQ(*store_->Get("n"), "-2");
  ASSERT_TRUE(store_->Set("text", "abc").ok());
  EXPECT_EQ(store_->Add("text", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(StoreConformanceTest, ConcurrentAddsAreAtomic) {
  constexpr int kThreads = 4;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(store_->Add("counter", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*store_->Get("counter"), absl::StrCat(kThreads * kAdds));
}

TEST_P(StoreConformanceTest, CompareSet) {
  // Missing key compares equal to "".
  EXPECT_EQ(*store_->CompareSet("cas", "x", "y"), "");
  EXPECT_FALSE(*store_->Check({"cas"}));
  EXPECT_EQ(*store_->CompareSet("cas", "", "first"), "first");
  EXPECT_EQ(*store_->CompareSet("cas", "wrong", "second"), "first");
  EXPECT_EQ(*store_->CompareSet("cas", "first", "second"), "second");
  EXPECT_EQ(*store_->Get("cas"), "second");
}

TEST_P(StoreConformanceTest, CheckDeleteAndNumKeys) {
  EXPECT_EQ(*store_->NumKeys(), 0);
  ASSERT_TRUE(store_->Set("k1", "v").ok());
  ASSERT_TRUE(store_->Set("k2", "v").ok());
  EXPECT_TRUE(*store_->Check({"k1", "k2"}));
  EXPECT_FALSE(*store_->Check({"k1", "k3"}));
  EXPECT_EQ(*store_->NumKeys(), 2);
  EXPECT_TRUE(*store_->DeleteKey("k1"));
  EXPECT_FALSE(*store_->DeleteKey("k1"));
  EXPECT_FALSE(*store_->Check({"k1"}));
  EXPECT_EQ(*store_->NumKeys(), 1);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreConformanceTest, ::testing::ValuesIn(Factories()),
                         [](const auto& info) { return info.param.name; });

TEST(PrefixStoreTest, PrefixesIsolateKeys) {
  auto base = std::make_shared<HashStore>(absl::Seconds(1));
  PrefixStore a("group_a", base);
  PrefixStore b("group_b", base);
  ASSERT_TRUE(a.Set("rank_0", "A").ok());
  ASSERT_TRUE(b.Set("rank_0", "B").ok());
  EXPECT_EQ(*a.Get("rank_0"), "A");
  EXPECT_EQ(*b.Get("rank_0"), "B");
  EXPECT_EQ(*base->Get("group_a/rank_0"), "A");
  // Nested prefixes compose.
  PrefixStore nested("inner", std::make_shared<PrefixStore>("outer", base));
  ASSERT_TRUE(nested.Set("k", "v").ok());
  EXPECT_EQ(*base->Get("outer/inner/k"), "v");
  absl::Status s = a.Wait({"missing"}, absl::Milliseconds(20));
  EXPECT_TRUE(absl::StrContains(s.message(), "group_a/missing")) << s;
}

}  // namespace
}  // namespace weft::comm
