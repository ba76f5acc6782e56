#include "data/batch_ring.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/tensor/allocator.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

std::vector<FieldSpec> Fields() {
  return {{"x", DType::kI32, {3}}, {"y", DType::kF32, {}}};
}

std::shared_ptr<BatchRing> MakeRing(int slots) {
  return *BatchRing::Create(Fields(), /*batch_size=*/4, slots, PinnedHostAllocator());
}

TEST(BatchRingTest, LentTensorsViewTheSlotAndFreeItWhenTheLastViewDies) {
  auto ring = MakeRing(1);
  const int slot = ring->Acquire(0);
  ASSERT_EQ(slot, 0);
  static_cast<int32_t*>(ring->FieldData(slot, 0))[5] = 42;
  std::vector<Tensor> t = ring->Lend(slot, 4);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].shape(), (Shape{4, 3}));
  EXPECT_EQ(t[1].shape(), (Shape{4}));
  EXPECT_EQ(t[0].data<int32_t>()[5], 42);
  EXPECT_EQ(t[0].storage()->pinned(), PinnedHostAllocator()->pinned());
  EXPECT_EQ(ring->NumLent(), 1);

  Tensor view = t[0].Slice(0, 1, 2);
  t.clear();
  EXPECT_EQ(ring->NumLent(), 1) << "a view still reads the slot";
  view = Tensor();
  EXPECT_EQ(ring->NumLent(), 0);
  EXPECT_EQ(ring->Acquire(1), 0);  // free again
}

// A clone of a lent batch tensor gets its own memory (pinned like the
// ring's) and leaves the slot lent to the original alone. Before, Clone asked
// the slot's one-buffer allocator again and aborted ("lent twice").
TEST(BatchRingTest, ClonesOfLentTensorsGetTheirOwnMemory) {
  auto ring = MakeRing(1);
  const int slot = ring->Acquire(0);
  static_cast<int32_t*>(ring->FieldData(slot, 0))[5] = 42;
  std::vector<Tensor> t = ring->Lend(slot, 4);
  absl::StatusOr<Tensor> copy = t[0].Clone();
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_NE(copy->raw_data(), t[0].raw_data());
  EXPECT_EQ(copy->data<int32_t>()[5], 42);
  EXPECT_EQ(copy->storage()->pinned(), PinnedHostAllocator()->pinned());
  t.clear();
  EXPECT_EQ(ring->NumLent(), 0) << "the clone does not hold the slot";
  EXPECT_EQ(copy->data<int32_t>()[5], 42);
}

TEST(BatchRingTest, ShortBatchesAreRowSlicesOfTheSlot) {
  auto ring = MakeRing(1);
  std::vector<Tensor> t = ring->Lend(ring->Acquire(0), 2);
  EXPECT_EQ(t[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(t[1].shape(), (Shape{2}));
  EXPECT_TRUE(t[0].is_contiguous());
}

TEST(BatchRingTest, TicketsAreServedInOrder) {
  auto ring = MakeRing(2);
  std::atomic<int> got_second{-2};
  std::thread second([&] { got_second = ring->Acquire(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(got_second.load(), -2) << "ticket 1 must wait for ticket 0";
  EXPECT_GE(ring->Acquire(0), 0);
  second.join();
  EXPECT_GE(got_second.load(), 0);
}

TEST(BatchRingTest, CancelWakesWaitersAndResetRestarts) {
  auto ring = MakeRing(1);
  ASSERT_EQ(ring->Acquire(0), 0);
  std::atomic<int> result{-2};
  std::thread waiter([&] { result = ring->Acquire(1); });  // no free slot
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ring->Cancel();
  waiter.join();
  EXPECT_EQ(result.load(), -1);
  ring->Release(0);
  ring->ResetTickets(7);
  EXPECT_EQ(ring->Acquire(7), 0);
}

TEST(BatchRingTest, LentTensorsKeepTheRingAlive) {
  auto ring = MakeRing(2);
  std::weak_ptr<BatchRing> weak = ring;
  std::vector<Tensor> t = ring->Lend(ring->Acquire(0), 4);
  ring.reset();
  EXPECT_FALSE(weak.expired());
  t[1].data<float>()[3] = 1.5f;  // still valid memory
  t.clear();
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace weft::data
