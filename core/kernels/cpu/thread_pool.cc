#include "core/kernels/cpu/thread_pool.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace weft::cpu {
namespace {

class Pool {
 public:
  explicit Pool(int threads) : threads_(std::max(1, threads)) {
    for (int t = 1; t < threads_; ++t) workers_.emplace_back([this, t] { Loop(t); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return threads_; }

  void Run(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    std::lock_guard<std::mutex> run_lock(run_mu_);  // one parallel region at a time
    const int64_t chunks = std::min<int64_t>(threads_, n);
    {
      std::lock_guard<std::mutex> l(mu_);
      fn_ = &fn;
      n_ = n;
      chunks_ = chunks;
      pending_.store(static_cast<int>(chunks - 1), std::memory_order_relaxed);
      ++generation_;
    }
    cv_.notify_all();
    Chunk(0);
    // Short spin, then block: the workers finish at about the same time.
    for (int spin = 0; pending_.load(std::memory_order_acquire) > 0; ++spin) {
      if (spin > 2000) {
        std::unique_lock<std::mutex> l(mu_);
        done_cv_.wait(l, [this] { return pending_.load(std::memory_order_acquire) == 0; });
        break;
      }
    }
  }

 private:
  void Chunk(int64_t c) {
    const int64_t begin = n_ * c / chunks_, end = n_ * (c + 1) / chunks_;
    if (begin < end) (*fn_)(begin, end);
  }
  void Loop(int t) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
        if (t >= chunks_) continue;
      }
      Chunk(t);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> l(mu_);
        done_cv_.notify_all();
      }
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunks_ = 1;
  std::atomic<int> pending_{0};
};

std::mutex g_mu;
// Shared, so that SetKernelThreads on one thread cannot destroy a pool that
// a ParallelFor on another is running in: the old pool goes (joining its
// workers) when its last caller lets go. Leaked: kernels may run during
// static destruction.
std::shared_ptr<Pool>* g_pool = new std::shared_ptr<Pool>();

std::shared_ptr<Pool> GetPool() {
  std::lock_guard<std::mutex> l(g_mu);
  if (*g_pool == nullptr) {
    // The pool takes over OpenBLAS's threads: sgemm runs single-threaded
    // inside pool chunks from now on.
    *g_pool = std::make_shared<Pool>(std::max(1, openblas_get_num_threads()));
    openblas_set_num_threads(1);
  }
  return *g_pool;
}

}  // namespace

int KernelThreads() { return GetPool()->threads(); }

void SetKernelThreads(int threads) {
  if (threads <= 0) return;
  std::shared_ptr<Pool> old;  // joined outside the lock, if this was the last user
  std::lock_guard<std::mutex> l(g_mu);
  if (*g_pool != nullptr && (*g_pool)->threads() == threads) return;
  old = std::exchange(*g_pool, std::make_shared<Pool>(threads));
  openblas_set_num_threads(1);
}

void ParallelFor(int64_t n, int64_t min_per_thread,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const std::shared_ptr<Pool> pool = GetPool();
  if (pool->threads() == 1 || n < 2 * std::max<int64_t>(1, min_per_thread)) {
    fn(0, n);
    return;
  }
  pool->Run(n, fn);
}

}  // namespace weft::cpu
