// A small persistent thread pool for the production CPU kernels.
//
// ParallelFor splits [0, n) into contiguous chunks, one per thread; every
// index is processed by exactly one thread and the kernels that use it only
// parallelise over independent outputs (rows, (batch, head) pairs, elements),
// so results never depend on the thread count. The pool uses the same thread
// count as OpenBLAS (SetNumThreads sets both), and OpenBLAS and the pool run
// one after the other, never at the same time, so the machine is not
// oversubscribed.
#ifndef WEFT_CORE_KERNELS_CPU_THREAD_POOL_H_
#define WEFT_CORE_KERNELS_CPU_THREAD_POOL_H_

#include <cstdint>
#include <functional>

namespace weft::cpu {

// Threads used by ParallelFor (>= 1). Defaults to OpenBLAS's thread count.
// Any thread may set it at any time; a ParallelFor already running on
// another thread finishes on the old pool.
int KernelThreads();
void SetKernelThreads(int threads);

// fn(begin, end) over chunks of [0, n). Runs inline when n < min_per_thread*2
// or with one thread.
void ParallelFor(int64_t n, int64_t min_per_thread,
                 const std::function<void(int64_t, int64_t)>& fn);

}  // namespace weft::cpu

#endif  // WEFT_CORE_KERNELS_CPU_THREAD_POOL_H_
