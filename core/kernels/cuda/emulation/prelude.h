// CPU emulation of the CUDA features weft's kernels use, force-included
// (g++ -include) before sources rewritten by transform.py. Each CUDA thread
// is a std::thread; blocks run one after another, so function-local statics
// stand in for shared memory; std::barrier implements __syncthreads and the
// warp collectives (__shfl_xor_sync, mma.sync, ldmatrix). emu::mma rebuilds
// the 16x16 A and 16x8 B tiles from the 32 lanes' registers with the PTX ISA
// fragment layout for mma.m16n8k16 (bf16) and multiplies in f32;
// emu::ldmatrix hands each lane its words of the 8x8 matrices whose rows
// other lanes addressed; emu::cp_async copies at once (or, with
// EMU_CP_ASYNC=late, at the cp.async.wait_group that must cover it).
// Slow (a thread per CUDA thread): keep problem sizes small.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <vector_types.h>
#include <vector_functions.h>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <thread>
#include <vector>
#include <memory>
#include <functional>

namespace emu {
struct Dim { unsigned x = 1, y = 1, z = 1; };
inline thread_local Dim threadIdx_, blockIdx_, blockDim_, gridDim_;
inline thread_local unsigned linear_tid_;
// Warp collectives exchange through slot (n & 1) for the n-th collective of
// a thread, so one barrier each suffices: a lane reuses a slot two
// collectives later, after every lane passed the barrier in between, that
// is, after every lane finished reading it.
inline thread_local unsigned collective_ = 0;
struct Block {
  std::unique_ptr<std::barrier<>> bar;
  std::vector<std::unique_ptr<std::barrier<>>> warp_bar;
  size_t dyn_smem = 0;  // the launch's dynamic shared memory bytes
  float xchg[2][32][32];
  uint32_t a[2][32][32][4], b[2][32][32][2];
  const void* addr[2][32][32];
};
inline Block* g_block = nullptr;
inline int warp_id() { return linear_tid_ / 32; }
inline int lane_id() { return linear_tid_ % 32; }
inline int next_slot() { return collective_++ & 1; }
inline void warp_sync() { g_block->warp_bar[warp_id()]->arrive_and_wait(); }

[[noreturn]] inline void Fail(const char* what, const void* p, long detail) {
  fprintf(stderr, "emu: %s (address %p, %ld) in block (%u,%u,%u) thread %u\n", what, p, detail,
          blockIdx_.x, blockIdx_.y, blockIdx_.z, linear_tid_);
  std::abort();
}

// Each translation unit's stand-in for dynamic shared memory (the `smem`
// defined at the end of this file) registers here, so PTX that names a
// shared address can insist that [p, p + n) lies in the launch's window.
// owner[i]: the thread whose cp.async last wrote 16-byte chunk i of the
// range and has not yet run fence.proxy.async since (-1: none). wgmma reads
// shared memory through the async proxy: a chunk still owned is one the
// tensor cores may not see (a missing fence; plain stores are not tracked).
struct Range {
  unsigned char* base;
  size_t size;
  std::atomic<int>* owner;
};
inline std::vector<Range> g_smem;
inline bool RegisterSmem(unsigned char* base, size_t size) {
  auto* owner = new std::atomic<int>[size / 16];
  for (size_t i = 0; i < size / 16; ++i) owner[i].store(-1, std::memory_order_relaxed);
  g_smem.push_back({base, size, owner});
  return true;
}
inline std::atomic<int>* ChunkOwner(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (const Range& r : g_smem) {
    if (c >= r.base && c < r.base + r.size) return &r.owner[(c - r.base) / 16];
  }
  return nullptr;
}
inline thread_local std::vector<std::atomic<int>*> written_;  // chunks this thread owns
inline void CheckShared(const void* p, size_t n, size_t align, const char* what) {
  const auto* c = static_cast<const unsigned char*>(p);
  if (reinterpret_cast<uintptr_t>(p) % align != 0) Fail(what, p, -long(align));
  for (const Range& r : g_smem) {
    if (c >= r.base && c < r.base + r.size) {
      if (c + n > r.base + g_block->dyn_smem) Fail(what, p, long(c - r.base));
      return;
    }
  }
  Fail(what, p, 0);
}

inline float bf(uint32_t pair, int half) {
  uint16_t bits = half ? (pair >> 16) : (pair & 0xffff);
  uint32_t f = uint32_t(bits) << 16;
  float r;
  std::memcpy(&r, &f, 4);
  return r;
}

// PTX m16n8k16 fragment layout (bf16): see attention_mma.cuh.
inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int w = warp_id(), l = lane_id(), s = next_slot();
  for (int i = 0; i < 4; ++i) g_block->a[s][w][l][i] = a[i];
  for (int i = 0; i < 2; ++i) g_block->b[s][w][l][i] = b[i];
  warp_sync();
  auto A = [&](int r, int c) {
    int lane = (r % 8) * 4 + (c % 8) / 2;
    int reg = (r >= 8 ? 1 : 0) + (c >= 8 ? 2 : 0);
    return bf(g_block->a[s][w][lane][reg], c % 2);
  };
  auto B = [&](int k, int n) {
    int lane = n * 4 + (k % 8) / 2;
    int reg = k >= 8 ? 1 : 0;
    return bf(g_block->b[s][w][lane][reg], k % 2);
  };
  const int g = l / 4, t = l % 4;
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), c = 2 * t + (i % 2);
    float acc = 0;
    for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, c);
    d[i] += acc;
  }
}

// ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16 (PTX ISA): lane 8i + j
// supplies the address of row j (16 contiguous bytes) of 8x8 matrix i,
// i < N (other lanes' addresses are ignored). Lane l receives in out[i] the
// 32-bit word of matrix i holding row l / 4, columns 2 * (l % 4) and + 1
// (lower column in the low half); .trans delivers the transposed matrix,
// so that word holds memory rows 2 * (l % 4) and + 1 of column l / 4.
template <int N, bool Trans>
inline void ldmatrix(const void* row, uint32_t* const (&out)[N]) {
  const int w = warp_id(), l = lane_id(), s = next_slot();
  if (l < 8 * N) CheckShared(row, 16, 16, "ldmatrix row address outside the dynamic shared window or not 16-byte aligned");
  g_block->addr[s][w][l] = row;
  warp_sync();
  for (int i = 0; i < N; ++i) {
    uint16_t half[2];
    for (int j = 0; j < 2; ++j) {
      const int r = l / 4, c = 2 * (l % 4) + j;  // fragment element (r, c)
      const int mem_row = Trans ? c : r, mem_col = Trans ? r : c;
      const auto* p = static_cast<const unsigned char*>(g_block->addr[s][w][8 * i + mem_row]);
      std::memcpy(&half[j], p + 2 * mem_col, 2);
    }
    *out[i] = uint32_t(half[0]) | uint32_t(half[1]) << 16;
  }
}

// cp.async.{ca,cg}.shared.global [dst], [src], size, src_size: copies
// src_size bytes and zero-fills the rest of the size (4, 8 or 16) bytes. By
// default at once (a copy is then visible after the next barrier, as a
// waited-for one is); EMU_CP_ASYNC=late holds each copy back until a
// cp.async.wait_group leaves its group no longer pending, the latest the
// hardware may land it, so a read that the waits do not cover sees stale
// shared memory.
struct Copy { void* dst; const void* src; int size, src_size; };
inline thread_local std::vector<Copy> uncommitted_;
inline thread_local std::vector<std::vector<Copy>> groups_;
// Set from EMU_CP_ASYNC at start-up; a check may switch it between launches.
inline bool g_late_copies = [] {
  const char* e = std::getenv("EMU_CP_ASYNC");
  return e != nullptr && std::strcmp(e, "late") == 0;
}();
inline bool LateCopies() { return g_late_copies; }
// Blocks run in reverse order (last block first) when set.
inline bool g_reverse_blocks = false;
inline void DoCopy(const Copy& c) {
  std::memcpy(c.dst, c.src, c.src_size);
  std::memset(static_cast<char*>(c.dst) + c.src_size, 0, c.size - c.src_size);
  if (std::atomic<int>* o = ChunkOwner(c.dst)) {  // sizes <= 16, aligned: one chunk
    o->store(int(linear_tid_), std::memory_order_relaxed);
    written_.push_back(o);
  }
}
// fence.proxy.async: this thread's landed copies become visible to wgmma
// (after the barrier that follows it, which the kernels have).
inline void fence_proxy_async() {
  for (std::atomic<int>* o : written_) {
    int mine = int(linear_tid_);
    o->compare_exchange_strong(mine, -1, std::memory_order_relaxed);
  }
  written_.clear();
  warp_sync();
}
inline void cp_async(void* dst, const void* src, int size, int src_size) {
  if (size != 4 && size != 8 && size != 16) Fail("cp.async size not 4, 8 or 16", dst, size);
  if (src_size < 0 || src_size > size) Fail("cp.async src-size outside [0, size]", src, src_size);
  if (reinterpret_cast<uintptr_t>(src) % size != 0) Fail("cp.async global source misaligned", src, size);
  CheckShared(dst, size, size, "cp.async destination outside the dynamic shared window or misaligned");
  const Copy c{dst, src, size, src_size};
  if (LateCopies()) {
    uncommitted_.push_back(c);
  } else {
    DoCopy(c);
  }
}
inline void cp_async_commit() {
  if (LateCopies()) groups_.push_back(std::move(uncommitted_)), uncommitted_.clear();
}
// cp.async.wait_group n: all but the n most recently committed groups land.
inline void cp_async_wait(int n) {
  if (!LateCopies()) return;
  const size_t done = groups_.size() > size_t(n) ? groups_.size() - n : 0;
  for (size_t i = 0; i < done; ++i) for (const Copy& c : groups_[i]) DoCopy(c);
  groups_.erase(groups_.begin(), groups_.begin() + done);
}

// wgmma.mma_async runs when a wgmma.wait_group retires its group, not at
// issue (see emu::wgmma below): the accumulators in flight hold kInFlight
// (a NaN) until then, so a read before the wait shows up in the results,
// and B is read from shared memory at completion, so overwriting it early
// does too.
inline constexpr uint32_t kInFlight = 0x7fc0deadu;
inline bool InFlight(const float* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  return bits == kInFlight;
}
struct PendingWgmma {
  int n;                     // N of m64nNk16
  float* d[64];              // the lane's accumulator registers
  float init[64];            // their values at issue (unless chained)
  bool chained[64];          // d was in flight already: its input is that result
  uint32_t a[4];             // A is read at issue (registers, by value)
  const unsigned char* start;
  size_t lbo, sbo;
  int scale_d, trans_b;
};
inline thread_local std::vector<PendingWgmma> wg_uncommitted_;
inline thread_local std::vector<std::vector<PendingWgmma>> wg_groups_;
inline thread_local std::vector<std::pair<float*, float>> wg_running_;  // in-flight results

// One std::thread per CUDA thread of a block, reused for every block of the
// grid (blocks run one after another; thread creation dominated the run time).
template <typename K, typename... Args>
void Launch(K kernel, dim3 grid, dim3 block, size_t smem_bytes, void*, Args... args) {
  const unsigned nt = block.x * block.y * block.z;
  auto blk = std::make_unique<Block>();
  blk->bar = std::make_unique<std::barrier<>>(nt);
  for (unsigned w = 0; w < (nt + 31) / 32; ++w)
    blk->warp_bar.push_back(std::make_unique<std::barrier<>>(32));
  blk->dyn_smem = smem_bytes;
  g_block = blk.get();
  std::vector<std::thread> threads;
  for (unsigned tid = 0; tid < nt; ++tid) {
    threads.emplace_back([&, tid] {
      linear_tid_ = tid;
      threadIdx_ = {tid % block.x, (tid / block.x) % block.y, tid / (block.x * block.y)};
      blockDim_ = {block.x, block.y, block.z};
      gridDim_ = {grid.x, grid.y, grid.z};
      const unsigned blocks = grid.x * grid.y * grid.z;
      for (unsigned n = 0; n < blocks; ++n) {
        // x fastest, as a GPU tends to start them; reversed with
        // g_reverse_blocks (a kernel must not depend on the order).
        const unsigned lin = g_reverse_blocks ? blocks - 1 - n : n;
        const unsigned bx = lin % grid.x, by = lin / grid.x % grid.y,
                       bz = lin / (grid.x * grid.y);
        // Shared memory starts as garbage on a GPU: NaN bytes here, so
        // a read before the first write shows up in the results.
        if (tid == 0)
          for (const Range& r : g_smem) {
            std::memset(r.base, 0xff, std::min(smem_bytes, r.size));
            for (size_t i = 0; i < std::min(smem_bytes, r.size) / 16; ++i)
              r.owner[i].store(-1, std::memory_order_relaxed);
          }
        blk->bar->arrive_and_wait();  // the previous block is done, smem reset
        blockIdx_ = {bx, by, bz};
        kernel(args...);
        uncommitted_.clear();  // copies never waited for do not land
        groups_.clear();
        written_.clear();
        if (!wg_uncommitted_.empty() || !wg_groups_.empty())
          Fail("wgmma still in flight when the block ended (no wgmma.wait_group 0)", nullptr,
               long(wg_groups_.size()));
        blk->bar->arrive_and_wait();
      }
    });
  }
  for (auto& th : threads) th.join();
  g_block = nullptr;
}
}  // namespace emu

#define threadIdx (::emu::threadIdx_)
#define blockIdx (::emu::blockIdx_)
#define blockDim (::emu::blockDim_)
#define gridDim (::emu::gridDim_)
inline void __syncthreads() { emu::g_block->bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
  const int w = emu::warp_id(), l = emu::lane_id();
  const int s = emu::next_slot();
  emu::g_block->xchg[s][w][l] = v;
  emu::warp_sync();
  return emu::g_block->xchg[s][w][l ^ o];
}
// __shfl_sync(mask, v, src): lane src's v to every lane (ints: the kernels
// broadcast the warp index with it; exact below 2^24 through the float slot).
inline int __shfl_sync(unsigned, int v, int src) {
  const int w = emu::warp_id(), l = emu::lane_id();
  const int s = emu::next_slot();
  emu::g_block->xchg[s][w][l] = static_cast<float>(v);
  emu::warp_sync();
  return static_cast<int>(emu::g_block->xchg[s][w][src]);
}
// A barrier of the calling warp. The kernels call it with every lane of the
// warp (mask ignored); one that named a subset of the lanes would hang here.
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp_sync(); }
template <typename T> T __ldcs(const T* p) { return *p; }
template <typename T> T __ldcg(const T* p) { return *p; }
// Global atomics and fences (the fused-dq backward's tickets and
// semaphores). Blocks run one after another here, so a semaphore wait is
// satisfied on arrival or never: a wait that polls on fails instead of hanging.
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
[[noreturn]] inline void __trap() { emu::Fail("__trap (a semaphore wait that never ended?)", nullptr, 0); }
inline cudaError_t EmuMemsetAsync(void* p, int value, size_t bytes, void*) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline cudaError_t EmuFuncSetAttribute(...) { return cudaSuccess; }
inline cudaError_t EmuGetDevice(int* device) { *device = 0; return cudaSuccess; }
// The emulated device reports an H100's compute capability 9.0 (it runs
// wgmma) and shared memory (227 KiB a block may opt in to, 228 KiB an SM).
inline cudaError_t EmuDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 232448; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 233472; break;
    default: *value = 0;
  }
  return cudaSuccess;
}

namespace weft::cuda { namespace {
alignas(16) unsigned char smem[1 << 20];  // extern __shared__ smem[] of this file's kernels
const bool emu_smem_registered = ::emu::RegisterSmem(smem, sizeof(smem));
} }

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 with A in registers
// (wgmma.cuh). Per warp the A fragment (16 rows x 16 k) and each 8-column
// slice j of D (d[4j..4j+3]) have the mma.m16n8k16 layouts, so the warp's
// 16 rows of D need only its own lanes' A; B (16 x N) is read through the
// descriptor, no swizzling (anything else fails), as PTX's canonical
// layouts say: K-major (trans_b 0) element (k, n) at byte
// 2 (k % 8) + 16 (n % 8) + SBO (n / 8) + LBO (k / 8); N-major (trans_b 1)
// at 2 (n % 8) + 16 (k % 8) + SBO (n / 8) + LBO (k / 8). The 14-bit start field
// holds bits 4-17 of the shared address: resolved against this file's
// shared window (a per-file copy: it names this file's smem).
//
// Asynchrony, as the PTX ISA allows it at its latest: issue records the
// product and marks its accumulators in flight (emu::kInFlight); commit
// closes a group; wait_group n runs every product of all but the n newest
// groups in issue order, reading B then, and writes the accumulators back
// once no pending product uses them. Writing an in-flight accumulator
// fails; reading one yields NaN.
namespace emu {
inline void RunWgmma(const PendingWgmma& op) {
  const int w = warp_id(), l = lane_id(), s = next_slot();
  for (int i = 0; i < 4; ++i) g_block->a[s][w][l][i] = op.a[i];
  warp_sync();
  auto B = [&](int k, int n) {
    const int inner = op.trans_b ? n % 8 : k % 8, row8 = op.trans_b ? k % 8 : n % 8;
    const unsigned char* row = op.start + (n / 8) * op.sbo + (k / 8) * op.lbo + row8 * 16;
    CheckShared(row, 16, 16, "wgmma B core-matrix row outside the dynamic shared window or misaligned");
    if (ChunkOwner(row)->load(std::memory_order_relaxed) >= 0)
      Fail("wgmma reads shared memory that cp.async wrote with no fence.proxy.async by the writer since",
           row, ChunkOwner(row)->load());
    uint16_t bits;
    std::memcpy(&bits, row + 2 * inner, 2);
    return bf(bits, 0);
  };
  auto A = [&](int r, int c) {
    int lane = (r % 8) * 4 + (c % 8) / 2;
    int reg = (r >= 8 ? 1 : 0) + (c >= 8 ? 2 : 0);
    return bf(g_block->a[s][w][lane][reg], c % 2);
  };
  auto running = [&](float* p) -> std::pair<float*, float>& {
    for (auto& r : wg_running_) if (r.first == p) return r;
    wg_running_.push_back({p, 0.0f});
    return wg_running_.back();
  };
  const int g = l / 4, t = l % 4;
  for (int j = 0; j < op.n / 8; ++j) {
    for (int e = 0; e < 4; ++e) {
      const int i = 4 * j + e;
      const int r = g + (e >= 2 ? 8 : 0), c = 8 * j + 2 * t + (e % 2);
      float acc = 0;
      for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, c);
      auto& slot = running(op.d[i]);
      const float in = !op.scale_d ? 0.0f : op.chained[i] ? slot.second : op.init[i];
      slot.second = in + acc;
    }
  }
}
inline void wgmma_commit() {
  warp_sync();
  wg_groups_.push_back(std::move(wg_uncommitted_));
  wg_uncommitted_.clear();
}
inline void wgmma_wait(int n) {
  warp_sync();
  const size_t done = wg_groups_.size() > size_t(n) ? wg_groups_.size() - n : 0;
  for (size_t i = 0; i < done; ++i) for (const PendingWgmma& op : wg_groups_[i]) RunWgmma(op);
  wg_groups_.erase(wg_groups_.begin(), wg_groups_.begin() + done);
  auto pending = [&](const float* p) {
    auto uses = [&](const std::vector<PendingWgmma>& ops) {
      for (const PendingWgmma& op : ops)
        for (int i = 0; i < op.n / 2; ++i) if (op.d[i] == p) return true;
      return false;
    };
    if (uses(wg_uncommitted_)) return true;
    for (const auto& grp : wg_groups_) if (uses(grp)) return true;
    return false;
  };
  for (size_t i = 0; i < wg_running_.size();) {
    float* p = wg_running_[i].first;
    if (pending(p)) { ++i; continue; }
    if (!InFlight(p)) Fail("wgmma accumulator written while its wgmma was in flight", p, 0);
    *p = wg_running_[i].second;
    wg_running_.erase(wg_running_.begin() + i);
  }
  warp_sync();
}
namespace {
template <int N>
void wgmma(float* const (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc, int scale_d,
           int trans_b) {
  if ((desc >> 62) != 0) Fail("wgmma descriptor: swizzled layouts are not emulated", nullptr, long(desc >> 62));
  if (((desc >> 49) & 7) != 0) Fail("wgmma descriptor: base offset not 0", nullptr, long((desc >> 49) & 7));
  unsigned char* base = ::weft::cuda::smem;
  const uintptr_t low = reinterpret_cast<uintptr_t>(base) & 0x3FFFF;
  const uintptr_t offset = (((desc & 0x3FFF) << 4) - low) & 0x3FFFF;
  PendingWgmma op;
  op.n = N;
  op.start = base + offset;
  op.lbo = ((desc >> 16) & 0x3FFF) << 4;
  op.sbo = ((desc >> 32) & 0x3FFF) << 4;
  op.scale_d = scale_d;
  op.trans_b = trans_b;
  for (int i = 0; i < 4; ++i) op.a[i] = a[i];
  for (int i = 0; i < N / 2; ++i) {
    op.d[i] = d[i];
    op.chained[i] = InFlight(d[i]);
    op.init[i] = *d[i];
    std::memcpy(d[i], &kInFlight, 4);
  }
  wg_uncommitted_.push_back(op);
}
}  // namespace
}  // namespace emu
#undef __launch_bounds__
#define __launch_bounds__(...)
#include <algorithm>
#include <numeric>
namespace emucub {
template <typename K, typename V>
cudaError_t SortPairs(void* temp, size_t& bytes, const K* kin, K* kout, const V* vin, V* vout,
                      int n, int, int, cudaStream_t = nullptr) {
  if (temp == nullptr) { bytes = 64; return cudaSuccess; }
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return kin[a] < kin[b]; });
  for (int i = 0; i < n; ++i) { kout[i] = kin[idx[i]]; vout[i] = vin[idx[i]]; }
  return cudaSuccess;
}
}  // namespace emucub
