#include "core/tensor/caching_allocator.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

// Host memory standing in for a device; events complete when the test says.
class FakeSource : public DeviceMemorySource {
 public:
  struct State {
    int mallocs = 0;
    int frees = 0;
    size_t limit = SIZE_MAX;  // bytes the "device" can hold
    size_t in_use = 0;
    std::map<intptr_t, bool> events;  // id -> done
    std::map<void*, size_t> sizes;
    std::set<NativeStream> capturing;  // streams "being captured into a graph"
  };
  explicit FakeSource(State* state) : s_(state) {}

  absl::StatusOr<void*> Malloc(size_t bytes) override {
    if (s_->in_use + bytes > s_->limit) return absl::ResourceExhaustedError("fake OOM");
    ++s_->mallocs;
    s_->in_use += bytes;
    void* p = std::malloc(bytes);
    s_->sizes[p] = bytes;
    return p;
  }
  void Free(void* ptr) override {
    ++s_->frees;
    s_->in_use -= s_->sizes[ptr];
    s_->sizes.erase(ptr);
    std::free(ptr);
  }
  absl::StatusOr<NativeEvent> RecordEvent(NativeStream) override {
    intptr_t id = static_cast<intptr_t>(s_->events.size()) + 1;
    s_->events[id] = false;
    return reinterpret_cast<NativeEvent>(id);
  }
  absl::StatusOr<bool> EventDone(NativeEvent e) override {
    return s_->events[reinterpret_cast<intptr_t>(e)];
  }
  void DestroyEvent(NativeEvent) override {}
  Device device() const override { return Device::Cuda(0); }
  bool Capturing(NativeStream stream) override { return s_->capturing.count(stream) > 0; }

 private:
  State* s_;
};

NativeStream S(intptr_t id) { return reinterpret_cast<NativeStream>(id); }

class CachingAllocatorTest : public ::testing::Test {
 protected:
  FakeSource::State state_;
  CachingAllocator alloc_{"fake", std::make_unique<FakeSource>(&state_)};
};

TEST_F(CachingAllocatorTest, SizeClasses) {
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::SegmentSize(512), 2u << 20);
  EXPECT_EQ(CachingAllocator::SegmentSize(1 << 20), 2u << 20);
  EXPECT_EQ(CachingAllocator::SegmentSize((1 << 20) + 512), 20u << 20);
  EXPECT_EQ(CachingAllocator::SegmentSize(11u << 20), 12u << 20);
}

TEST_F(CachingAllocatorTest, ReusesFreedBlockOnSameStream) {
  void* a = *alloc_.Allocate(1000, S(1));
  alloc_.Free(a);
  void* b = *alloc_.Allocate(900, S(1));
  EXPECT_EQ(a, b);
  EXPECT_EQ(state_.mallocs, 1);
  alloc_.Free(b);
}

TEST_F(CachingAllocatorTest, SmallBlocksShareASegment) {
  void* a = *alloc_.Allocate(1000, S(1));
  void* b = *alloc_.Allocate(1000, S(1));
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 1024);
  EXPECT_EQ(state_.mallocs, 1);
  alloc_.Free(a);
  alloc_.Free(b);
}

TEST_F(CachingAllocatorTest, DoesNotReuseAcrossStreams) {
  void* a = *alloc_.Allocate(1000, S(1));
  alloc_.Free(a);
  void* b = *alloc_.Allocate(1000, S(2));
  EXPECT_NE(a, b);
  EXPECT_EQ(state_.mallocs, 2);
  alloc_.Free(b);
}

TEST_F(CachingAllocatorTest, RecordedStreamDelaysReuseUntilEventCompletes) {
  void* a = *alloc_.Allocate(4096, S(1));
  ASSERT_TRUE(alloc_.RecordStream(a, S(2)).ok());
  alloc_.Free(a);
  // The event recorded on stream 2 has not completed: `a` must not come back.
  void* b = *alloc_.Allocate(4096, S(1));
  EXPECT_NE(a, b);
  state_.events[1] = true;
  void* c = *alloc_.Allocate(4096, S(1));
  EXPECT_EQ(a, c);
  alloc_.Free(b);
  alloc_.Free(c);
}

TEST_F(CachingAllocatorTest, StatsAreExact) {
  void* a = *alloc_.Allocate(1000, S(1));
  void* b = *alloc_.Allocate(3 << 20, S(1));
  AllocatorStats s = alloc_.Stats();
  EXPECT_EQ(s.allocated_bytes, 1000 + (3 << 20));
  EXPECT_EQ(s.reserved_bytes, (2 << 20) + (20 << 20));
  EXPECT_EQ(s.num_allocs, 2);
  alloc_.Free(b);
  s = alloc_.Stats();
  EXPECT_EQ(s.allocated_bytes, 1000);
  EXPECT_EQ(s.peak_allocated_bytes, 1000 + (3 << 20));
  EXPECT_EQ(s.reserved_bytes, (2 << 20) + (20 << 20));  // cached, not returned
  alloc_.Free(a);
  alloc_.EmptyCache();
  s = alloc_.Stats();
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.num_frees, 2);
  EXPECT_EQ(state_.frees, 2);
  EXPECT_EQ(alloc_.NumSegments(), 0);
}

TEST_F(CachingAllocatorTest, FreedNeighboursMergeBackIntoOneSegment) {
  void* a = *alloc_.Allocate(512, S(1));
  void* b = *alloc_.Allocate(512, S(1));
  void* c = *alloc_.Allocate(512, S(1));
  alloc_.Free(a);
  alloc_.Free(c);
  alloc_.Free(b);
  // Fully merged: a request for the whole segment fits without a new malloc.
  void* whole = *alloc_.Allocate(1 << 20, S(1));
  EXPECT_EQ(whole, a);
  EXPECT_EQ(state_.mallocs, 1);
  alloc_.Free(whole);
  alloc_.EmptyCache();
  EXPECT_EQ(alloc_.NumSegments(), 0);
}

TEST_F(CachingAllocatorTest, OutOfMemoryReleasesCacheThenRetries) {
  state_.limit = 24u << 20;
  void* a = *alloc_.Allocate(15u << 20, S(1));  // 16 MiB segment
  alloc_.Free(a);                               // cached
  void* b = *alloc_.Allocate(15u << 20, S(2));  // other stream: cache freed, retried
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(state_.frees, 1);
  auto c = alloc_.Allocate(15u << 20, S(2));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("out of device memory"), std::string::npos);
  alloc_.Free(b);
}

TEST_F(CachingAllocatorTest, LargeRequestsDoNotCarveHugeCachedBlocks) {
  void* big = *alloc_.Allocate(64u << 20, S(1));
  alloc_.Free(big);
  void* mid = *alloc_.Allocate(2u << 20, S(1));
  EXPECT_NE(mid, big);  // took a fresh 20 MiB segment instead of pinning 64 MiB
  alloc_.Free(mid);
}

TEST_F(CachingAllocatorTest, MidSizeRequestsReuseTheirSharedSegment) {
  // A 3 MiB request is served from a 20 MiB segment; freeing and asking again
  // must reuse it instead of calling the device malloc again.
  void* a = *alloc_.Allocate(3u << 20, S(1));
  alloc_.Free(a);
  void* b = *alloc_.Allocate(3u << 20, S(1));
  EXPECT_EQ(state_.mallocs, 1);
  alloc_.Free(b);
  // The probe from the review: three 3 MiB blocks allocated and freed five
  // times fit in one 20 MiB segment.
  for (int round = 0; round < 5; ++round) {
    void* p[3];
    for (void*& q : p) q = *alloc_.Allocate(3u << 20, S(1));
    for (void* q : p) alloc_.Free(q);
  }
  EXPECT_EQ(state_.mallocs, 1);
  EXPECT_EQ(alloc_.Stats().reserved_bytes, 20 << 20);
}

TEST_F(CachingAllocatorTest, ReservedStaysBoundedOverTrainingSteps) {
  // GPT-2 124M shapes (fp32): weights, grads and two Adam moments persist;
  // activations of a micro-batch (B=8, T=1024) come and go every step.
  const size_t V = 50257, T = 1024, C = 768, L = 12, B = 8, F = 4;
  std::vector<size_t> params = {V * C * F, T * C * F};
  for (size_t l = 0; l < L; ++l) {
    for (size_t s : {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C}) {
      params.push_back(s * F);
    }
  }
  params.push_back(C * F);
  params.push_back(C * F);
  std::vector<void*> persistent;
  for (int copy = 0; copy < 4; ++copy) {  // weights, grads, m, v
    for (size_t s : params) persistent.push_back(*alloc_.Allocate(s, S(1)));
  }
  auto step = [&] {
    std::vector<void*> acts;
    for (size_t l = 0; l < L; ++l) {
      for (size_t s : {B * T * C, B * T * 3 * C, B * 12 * T * T, B * T * C, B * T * C,
                       B * T * 4 * C, B * T * 4 * C, B * T * C}) {
        acts.push_back(*alloc_.Allocate(s * F, S(1)));
      }
    }
    void* logits = *alloc_.Allocate(B * T * V * F, S(1));
    // Backward: temporaries of mid sizes, freed quickly.
    for (size_t l = 0; l < L; ++l) {
      void* t1 = *alloc_.Allocate(B * T * 4 * C * F, S(1));
      void* t2 = *alloc_.Allocate(3u << 20, S(1));
      void* t3 = *alloc_.Allocate(C * C * F, S(1));
      alloc_.Free(t3);
      alloc_.Free(t2);
      alloc_.Free(t1);
      for (int k = 0; k < 8; ++k) {
        alloc_.Free(acts.back());
        acts.pop_back();
      }
    }
    alloc_.Free(logits);
    EXPECT_TRUE(acts.empty());
  };
  step();
  step();
  const AllocatorStats warm = alloc_.Stats();
  const int warm_mallocs = state_.mallocs;
  for (int i = 0; i < 20; ++i) step();
  const AllocatorStats s = alloc_.Stats();
  EXPECT_EQ(s.reserved_bytes, warm.reserved_bytes) << "reserved grew after warm-up";
  EXPECT_EQ(state_.mallocs, warm_mallocs) << "device mallocs after warm-up";
  EXPECT_LE(static_cast<double>(s.peak_reserved_bytes),
            1.25 * static_cast<double>(s.peak_allocated_bytes))
      << s.ToString();
  for (void* p : persistent) alloc_.Free(p);
}

// A graph replays at the addresses it captured: the shared allocator must
// not hand a captured stream memory that others will reuse, and a block
// freed during the capture never circulates again.
TEST_F(CachingAllocatorTest, SharedAllocatorRefusesCapturedStreamAndHoldsItsFrees) {
  void* before = *alloc_.Allocate(1000, S(1));
  void* neighbour = *alloc_.Allocate(1000, S(1));  // the next block of the segment
  ASSERT_EQ(static_cast<char*>(neighbour), static_cast<char*>(before) + 1024);
  state_.capturing.insert(S(1));
  absl::StatusOr<void*> during = alloc_.Allocate(1000, S(1));
  ASSERT_FALSE(during.ok());
  EXPECT_EQ(during.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(during.status().message().find("being captured"), std::string::npos)
      << during.status();
  void* other = *alloc_.Allocate(1000, S(2));  // other streams are not affected
  alloc_.Free(before);                         // freed inside the capture: held
  EXPECT_EQ(alloc_.CaptureHeldBytes(), 1024u);
  state_.capturing.clear();
  // Freeing its neighbour must not merge the held block back into the pool.
  alloc_.Free(neighbour);
  for (size_t bytes : {1000, 2000, 100000}) {
    char* after = static_cast<char*>(*alloc_.Allocate(bytes, S(1)));
    EXPECT_TRUE(after + bytes <= before || after >= static_cast<char*>(before) + 1024)
        << bytes << " bytes overlap the held block";
    alloc_.Free(after);
  }
  EXPECT_EQ(alloc_.CaptureHeldBytes(), 1024u);
  alloc_.Free(other);
}

// A block also used on a stream being captured is held too (its event would
// be recorded into the graph and never complete outside it).
TEST_F(CachingAllocatorTest, BlockUsedOnACapturedStreamIsHeld) {
  void* p = *alloc_.Allocate(1000, S(1));
  ASSERT_TRUE(alloc_.RecordStream(p, S(2)).ok());
  state_.capturing.insert(S(2));
  alloc_.Free(p);
  EXPECT_EQ(alloc_.CaptureHeldBytes(), 1024u);
  EXPECT_TRUE(state_.events.empty());
  state_.capturing.clear();
}

// The graph's own allocator serves the capture and reuses in stream order
// within it (the graph keeps that order).
TEST(CachingAllocatorCaptureTest, PrivateAllocatorServesCaptureAndReusesWithinIt) {
  FakeSource::State state;
  CachingAllocator pool("graph", std::make_unique<FakeSource>(&state), /*capture_private=*/true);
  state.capturing.insert(S(1));
  void* a = *pool.Allocate(1000, S(1));
  pool.Free(a);
  void* b = *pool.Allocate(1000, S(1));
  EXPECT_EQ(a, b);
  ASSERT_TRUE(pool.RecordStream(b, S(2)).ok());
  pool.Free(b);  // used on another stream too: held, no event recorded in a capture
  EXPECT_EQ(pool.CaptureHeldBytes(), 1024u);
  EXPECT_TRUE(state.events.empty());
  void* c = *pool.Allocate(1000, S(1));
  EXPECT_NE(c, b);
  pool.Free(c);  // a neighbour of the held block: it stays held
  void* d = *pool.Allocate(1000, S(1));
  EXPECT_NE(d, b);
  pool.Free(d);
}

}  // namespace
}  // namespace weft
