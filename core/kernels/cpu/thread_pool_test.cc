// The kernel thread pool: each index of [0, n) exactly once, for any thread
// count, from several calling threads at once (dp runs replicas on threads),
// and while another thread changes the thread count (a Trainer applying
// --cpu_threads while kernels run elsewhere in the process). The last two
// are what --config=tsan checks; without TSan they catch a crash or a lost
// index at best.
#include "core/kernels/cpu/thread_pool.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace weft::cpu {
namespace {

// Runs ParallelFor over [0, n) and returns how many indices were not
// visited exactly once.
int64_t MissedOrRepeated(int64_t n) {
  std::vector<std::atomic<int>> hits(n);
  ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
  });
  int64_t bad = 0;
  for (const std::atomic<int>& h : hits) bad += h.load() != 1;
  return bad;
}

TEST(ThreadPoolTest, EveryIndexOnceForAnyThreadCount) {
  const int before = KernelThreads();
  for (int threads : {1, 2, 3, 5}) {
    SetKernelThreads(threads);
    EXPECT_EQ(KernelThreads(), threads);
    for (int64_t n : {1, 2, 3, 7, 64, 1001}) {
      EXPECT_EQ(MissedOrRepeated(n), 0) << threads << " threads, n=" << n;
    }
  }
  SetKernelThreads(before);
}

TEST(ThreadPoolTest, ConcurrentCallersShareThePool) {
  const int before = KernelThreads();
  SetKernelThreads(3);
  std::atomic<int64_t> bad{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int k = 0; k < 50; ++k) bad += MissedOrRepeated(97);
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
  SetKernelThreads(before);
}

TEST(ThreadPoolTest, ThreadCountChangesWhileKernelsRun) {
  const int before = KernelThreads();
  SetKernelThreads(2);
  std::atomic<bool> done{false};
  std::atomic<int64_t> bad{0};
  std::thread kernels([&] {
    for (int k = 0; k < 200; ++k) bad += MissedOrRepeated(257);
    done = true;
  });
  for (int k = 0; !done; ++k) SetKernelThreads(2 + k % 3);
  kernels.join();
  EXPECT_EQ(bad.load(), 0);
  SetKernelThreads(before);
}

}  // namespace
}  // namespace weft::cpu
