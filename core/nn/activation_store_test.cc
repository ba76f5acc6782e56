#include "core/nn/activation_store.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace weft {
namespace {

Tensor Floats(int64_t n) { return *Tensor::Zeros({n}, DType::kF32, Device::Cpu()); }

TEST(ActivationStoreTest, SlotsAreIndependentAndFreedWhenDropped) {
  ActivationStore store;
  int a = 0, b = 0;  // two owners
  store.Get(&a, 0)[0] = Floats(100);
  store.Get(&a, 1)[0] = Floats(300);
  store.Get(&b, 1)[0] = Floats(50);
  EXPECT_EQ(store.SlotBytes(0), 400);
  EXPECT_EQ(store.SlotBytes(1), 1400);
  EXPECT_EQ(store.TotalBytes(), 1800);
  EXPECT_EQ(store.Find(&b, 0), nullptr);

  store.Drop(&a, 1);
  EXPECT_EQ(store.SlotBytes(1), 200);
  store.DropSlot(1);
  EXPECT_EQ(store.SlotBytes(1), 0);
  EXPECT_EQ(store.NumEntries(), 1);
  EXPECT_NE(store.Find(&a, 0), nullptr);
}

TEST(ActivationStoreTest, ViewsOfOneBufferCountOnce) {
  ActivationStore store;
  int owner = 0, other = 0;
  Tensor buf = Floats(64);
  SavedActivations& s = store.Get(&owner, 0);
  s[0] = buf.Slice(0, 0, 16);
  s[1] = buf.Slice(0, 16, 64);
  store.Get(&other, 0)[0] = buf;
  EXPECT_EQ(store.SlotBytes(0), 64 * 4);
}

TEST(ActivationStoreTest, DroppingReleasesTheMemory) {
  ActivationStore store;
  int owner = 0;
  std::weak_ptr<Storage> weak;
  {
    Tensor t = Floats(1000);
    weak = t.storage();
    store.Get(&owner, 3)[0] = t;
  }
  EXPECT_FALSE(weak.expired());  // the store keeps it alive
  store.DropSlot(3);
  EXPECT_TRUE(weak.expired());
}

TEST(ActivationStoreTest, ConcurrentOwnersDoNotInterfere) {
  ActivationStore store;
  std::vector<int> owners(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int slot = 0; slot < 50; ++slot) store.Get(&owners[i], slot)[0] = Floats(4);
      for (int slot = 0; slot < 50; slot += 2) store.Drop(&owners[i], slot);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store.NumEntries(), 8 * 25);
  EXPECT_EQ(store.TotalBytes(), 8 * 25 * 16);
}

TEST(ActivationStoreTest, DeferredWorkRunsInOrderPerSlotOnce) {
  ActivationStore store;
  std::vector<int> ran;
  store.Defer(1, [&] { ran.push_back(10); return absl::OkStatus(); });
  store.Defer(2, [&] { ran.push_back(20); return absl::OkStatus(); });
  store.Defer(1, [&] { ran.push_back(11); return absl::OkStatus(); });
  EXPECT_EQ(store.NumDeferred(1), 2);
  ASSERT_TRUE(store.RunDeferred(1).ok());
  EXPECT_EQ(ran, (std::vector<int>{10, 11}));
  EXPECT_EQ(store.NumDeferred(1), 0);
  ASSERT_TRUE(store.RunDeferred(1).ok());  // nothing left: a no-op
  EXPECT_EQ(ran.size(), 2u);
  store.Defer(2, [] { return absl::InternalError("gemm failed"); });
  EXPECT_EQ(store.RunDeferred(2).message(), "gemm failed");
  EXPECT_EQ(ran.back(), 20);
}

}  // namespace
}  // namespace weft
