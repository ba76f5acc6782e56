// CPU emulation of the CUDA features weft's kernels use, force-included
// (g++ -include) before sources rewritten by transform.py. Each CUDA thread
// is a std::thread; blocks run one after another, so function-local statics
// stand in for shared memory; std::barrier implements __syncthreads and the
// warp collectives (__shfl_xor_sync, mma.sync). emu::mma rebuilds the 16x16
// A and 16x8 B tiles from the 32 lanes' registers with the PTX ISA fragment
// layout for mma.m16n8k16 (bf16) and multiplies in f32. Slow (a thread per
// CUDA thread): keep problem sizes small.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <vector_types.h>
#include <vector_functions.h>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#include <memory>
#include <functional>

namespace emu {
struct Dim { unsigned x = 1, y = 1, z = 1; };
inline thread_local Dim threadIdx_, blockIdx_, blockDim_, gridDim_;
inline thread_local unsigned linear_tid_;
struct Block {
  std::unique_ptr<std::barrier<>> bar;
  std::vector<std::unique_ptr<std::barrier<>>> warp_bar;
  float xchg[32][32];
  uint32_t a[32][32][4], b[32][32][2];
};
inline Block* g_block = nullptr;
inline int warp_id() { return linear_tid_ / 32; }
inline int lane_id() { return linear_tid_ % 32; }
inline void warp_sync() { g_block->warp_bar[warp_id()]->arrive_and_wait(); }

inline float bf(uint32_t pair, int half) {
  uint16_t bits = half ? (pair >> 16) : (pair & 0xffff);
  uint32_t f = uint32_t(bits) << 16;
  float r;
  std::memcpy(&r, &f, 4);
  return r;
}

// PTX m16n8k16 fragment layout (bf16): see attention_mma.cuh.
inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int w = warp_id(), l = lane_id();
  for (int i = 0; i < 4; ++i) g_block->a[w][l][i] = a[i];
  for (int i = 0; i < 2; ++i) g_block->b[w][l][i] = b[i];
  warp_sync();
  auto A = [&](int r, int c) {
    int lane = (r % 8) * 4 + (c % 8) / 2;
    int reg = (r >= 8 ? 1 : 0) + (c >= 8 ? 2 : 0);
    return bf(g_block->a[w][lane][reg], c % 2);
  };
  auto B = [&](int k, int n) {
    int lane = n * 4 + (k % 8) / 2;
    int reg = k >= 8 ? 1 : 0;
    return bf(g_block->b[w][lane][reg], k % 2);
  };
  const int g = l / 4, t = l % 4;
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i >= 2 ? 8 : 0), c = 2 * t + (i % 2);
    float acc = 0;
    for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, c);
    d[i] += acc;
  }
  warp_sync();
}

template <typename K, typename... Args>
void Launch(K kernel, dim3 grid, dim3 block, size_t, void*, Args... args) {
  const unsigned nt = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block blk;
        blk.bar = std::make_unique<std::barrier<>>(nt);
        for (unsigned w = 0; w < (nt + 31) / 32; ++w)
          blk.warp_bar.push_back(std::make_unique<std::barrier<>>(32));
        g_block = &blk;
        std::vector<std::thread> threads;
        for (unsigned tid = 0; tid < nt; ++tid) {
          threads.emplace_back([&, tid] {
            linear_tid_ = tid;
            threadIdx_ = {tid % block.x, (tid / block.x) % block.y, tid / (block.x * block.y)};
            blockIdx_ = {bx, by, bz};
            blockDim_ = {block.x, block.y, block.z};
            gridDim_ = {grid.x, grid.y, grid.z};
            kernel(args...);
          });
        }
        for (auto& th : threads) th.join();
        g_block = nullptr;
      }
}
}  // namespace emu

#define threadIdx (::emu::threadIdx_)
#define blockIdx (::emu::blockIdx_)
#define blockDim (::emu::blockDim_)
#define gridDim (::emu::gridDim_)
inline void __syncthreads() { emu::g_block->bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
  const int w = emu::warp_id(), l = emu::lane_id();
  emu::g_block->xchg[w][l] = v;
  emu::warp_sync();
  const float r = emu::g_block->xchg[w][l ^ o];
  emu::warp_sync();
  return r;
}
template <typename T> T __ldcs(const T* p) { return *p; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline cudaError_t EmuFuncSetAttribute(...) { return cudaSuccess; }

namespace weft::cuda { namespace { alignas(16) unsigned char smem[1 << 20]; } }
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
