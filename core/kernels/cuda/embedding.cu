// Token + position embedding, of a whole table or of a vocabulary-parallel
// shard (tensor parallelism). Forward is a vectorized gather. Backward must
// scatter-add rows of dout into the token table without atomics (their order
// would make runs differ), so it buckets positions by token with a stable
// radix sort (CUB) and lets one block per distinct token sum its positions in
// ascending order, the same order the CPU reference uses. Frequent tokens
// make for long serial sums in one block; with BPE vocabularies that is a
// few hundred rows at most per batch.
#include <cub/device/device_radix_sort.cuh>

#include "core/base/errors.h"
#include "core/kernels/cuda/common.cuh"
#include "core/kernels/cuda/embedding.h"
#include "core/kernels/vocab_shard.h"

namespace weft::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowThreads = 128;  // WteGradKernel: threads per distinct token

// The table holds global rows [vocab_begin, vocab_begin + vocab_rows) (all
// of them, from 0, unless it is a vocabulary-parallel shard). Tokens outside:
// a shard's row is 0 (another shard adds it) plus the position; a whole
// table's is NaN (an invalid id).
template <typename T, int V, bool kShard>
__global__ void EmbeddingForwardKernel(T* __restrict__ out, const int32_t* __restrict__ tokens,
                                       const T* __restrict__ wte, const T* __restrict__ wpe,
                                       int64_t positions, int seq, int channels,
                                       int64_t vocab_rows, int64_t vocab_begin) {
  const int vecs = channels / V;
  const int64_t total = positions * vecs;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pos = idx / vecs;
    const int c = static_cast<int>(idx % vecs) * V;
    const int64_t row = VocabLocalRow(tokens[pos], vocab_begin, vocab_rows);
    float f[V];
    if (row >= 0) {
      LoadF<V>(wte + row * channels + c, f);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) f[k] = kShard ? 0.0f : NAN;
    }
    if (wpe != nullptr && (row >= 0 || kShard)) {
      float p[V];
      LoadF<V>(wpe + (pos % seq) * channels + c, p);
#pragma unroll
      for (int k = 0; k < V; ++k) f[k] += p[k];
    }
    StoreF<V>(out + pos * channels + c, f);
  }
}

// Sort input: key = the token's row in the table (ids it does not hold map
// to the sentinel vocab_rows, which sorts last and is skipped), value =
// position.
__global__ void PrepareSortKernel(uint32_t* __restrict__ keys, int32_t* __restrict__ vals,
                                  const int32_t* __restrict__ tokens, int n, int64_t vocab_rows,
                                  int64_t vocab_begin) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int64_t row = VocabLocalRow(tokens[i], vocab_begin, vocab_rows);
    keys[i] = static_cast<uint32_t>(row >= 0 ? row : vocab_rows);
    vals[i] = i;
  }
}

// One block per sorted index; only the first index of each run of equal keys
// does work, summing the run's dout rows in order (positions ascend within a
// run because the sort is stable and the values started as 0..n-1).
template <typename T, typename G, int V>
__global__ void WteGradKernel(G* __restrict__ dwte, const T* __restrict__ dout,
                              const uint32_t* __restrict__ keys, const int32_t* __restrict__ pos,
                              int n, int channels, uint32_t sentinel) {
  const int i = blockIdx.x;
  const uint32_t key = keys[i];
  if (key == sentinel || (i > 0 && keys[i - 1] == key)) return;  // uniform per block
  for (int c = threadIdx.x * V; c < channels; c += blockDim.x * V) {
    float acc[V] = {};
    for (int j = i; j < n && keys[j] == key; ++j) {
      float f[V];
      LoadF<V>(dout + int64_t(pos[j]) * channels + c, f);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += f[k];
    }
    G* row = dwte + int64_t(key) * channels + c;
#pragma unroll
    for (int k = 0; k < V; ++k) row[k] = FromF<G>(ToF(row[k]) + acc[k]);
  }
}

// dwpe[t, c] += sum over b of dout[b, t, c], b in order.
template <typename T, typename G>
__global__ void WpeGradKernel(G* __restrict__ dwpe, const T* __restrict__ dout, int batch,
                              int seq, int channels) {
  const int64_t total = int64_t(seq) * channels;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (int b = 0; b < batch; ++b) acc += ToF(dout[int64_t(b) * total + idx]);
    dwpe[idx] = FromF<G>(ToF(dwpe[idx]) + acc);
  }
}

int EndBit(int64_t vocab_rows) {  // bits that hold 0..vocab_rows (the sentinel)
  int bits = 1;
  while ((int64_t{1} << bits) <= vocab_rows) ++bits;
  return bits;
}

size_t Align256(size_t x) { return (x + 255) / 256 * 256; }

struct ScratchLayout {
  size_t keys_in, keys_out, vals_in, vals_out, temp, temp_bytes, total;
};

absl::StatusOr<ScratchLayout> Layout(int64_t n, int64_t vocab_rows) {
  if (n >= (int64_t{1} << 31) || vocab_rows >= (int64_t{1} << 31)) {
    return InvalidArgument("embedding backward over 2^31 positions or vocabulary rows",
                           "fewer than 2^31");
  }
  size_t temp_bytes = 0;
  // Size query only: no device work, no synchronization.
  WEFT_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(n),
      0, EndBit(vocab_rows)));
  const size_t words = Align256(sizeof(uint32_t) * static_cast<size_t>(n));
  ScratchLayout l{};
  l.keys_in = 0;
  l.keys_out = words;
  l.vals_in = 2 * words;
  l.vals_out = 3 * words;
  l.temp = 4 * words;
  l.temp_bytes = temp_bytes;
  l.total = 4 * words + Align256(temp_bytes);
  return l;
}

template <typename T, bool kShard>
absl::Status ForwardT(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t positions,
                      int seq, int channels, int64_t vocab_rows, int64_t vocab_begin,
                      cudaStream_t stream) {
  constexpr int V = Packed128<T>::kSize;
  const bool vec = channels % V == 0 && Aligned16(out) && Aligned16(wte) &&
                   (wpe == nullptr || Aligned16(wpe));
  if (vec) {
    EmbeddingForwardKernel<T, V, kShard><<<GridFor(positions * channels / V, kThreads), kThreads,
                                           0, stream>>>(out, tokens, wte, wpe, positions, seq,
                                                        channels, vocab_rows, vocab_begin);
  } else {
    EmbeddingForwardKernel<T, 1, kShard><<<GridFor(positions * channels, kThreads), kThreads, 0,
                                           stream>>>(out, tokens, wte, wpe, positions, seq,
                                                     channels, vocab_rows, vocab_begin);
  }
  return CheckLaunch("EmbeddingForwardKernel");
}

template <bool kShard>
absl::Status Forward(void* out, const int32_t* tokens, const void* wte, const void* wpe,
                     DType dtype, int64_t batch, int64_t seq, int64_t channels,
                     int64_t vocab_rows, int64_t vocab_begin, cudaStream_t stream) {
  const int64_t positions = batch * seq;
  if (positions * channels == 0) return absl::OkStatus();
  const int s = static_cast<int>(seq), c = static_cast<int>(channels);
  if (dtype == DType::kF32) {
    return ForwardT<float, kShard>(static_cast<float*>(out), tokens,
                                   static_cast<const float*>(wte), static_cast<const float*>(wpe),
                                   positions, s, c, vocab_rows, vocab_begin, stream);
  }
  return ForwardT<bf16, kShard>(static_cast<bf16*>(out), tokens, static_cast<const bf16*>(wte),
                                static_cast<const bf16*>(wpe), positions, s, c, vocab_rows,
                                vocab_begin, stream);
}

template <typename T, typename G>
absl::Status BackwardT(G* dwte, G* dwpe, const T* dout, const int32_t* tokens, int batch, int seq,
                       int channels, int64_t vocab_rows, int64_t vocab_begin, char* scratch,
                       const ScratchLayout& l, cudaStream_t stream) {
  const int n = batch * seq;
  auto* keys_in = reinterpret_cast<uint32_t*>(scratch + l.keys_in);
  auto* keys_out = reinterpret_cast<uint32_t*>(scratch + l.keys_out);
  auto* vals_in = reinterpret_cast<int32_t*>(scratch + l.vals_in);
  auto* vals_out = reinterpret_cast<int32_t*>(scratch + l.vals_out);
  PrepareSortKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(keys_in, vals_in, tokens, n,
                                                                   vocab_rows, vocab_begin);
  WEFT_RETURN_IF_ERROR(CheckLaunch("PrepareSortKernel"));
  size_t temp_bytes = l.temp_bytes;
  WEFT_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      scratch + l.temp, temp_bytes, keys_in, keys_out, vals_in, vals_out, n, 0,
      EndBit(vocab_rows), stream));
  constexpr int V = Packed128<T>::kSize;
  const uint32_t sentinel = static_cast<uint32_t>(vocab_rows);
  if (channels % V == 0 && Aligned16(dout)) {
    WteGradKernel<T, G, V><<<n, kRowThreads, 0, stream>>>(dwte, dout, keys_out, vals_out, n,
                                                          channels, sentinel);
  } else {
    WteGradKernel<T, G, 1><<<n, kRowThreads, 0, stream>>>(dwte, dout, keys_out, vals_out, n,
                                                          channels, sentinel);
  }
  WEFT_RETURN_IF_ERROR(CheckLaunch("WteGradKernel"));
  if (dwpe == nullptr) return absl::OkStatus();
  WpeGradKernel<T, G><<<GridFor(int64_t(seq) * channels, kThreads), kThreads, 0, stream>>>(
      dwpe, dout, batch, seq, channels);
  return CheckLaunch("WpeGradKernel");
}

template <typename T>
absl::Status BackwardG(void* dwte, void* dwpe, DType grad_dtype, const T* dout,
                       const int32_t* tokens, int batch, int seq, int channels,
                       int64_t vocab_rows, int64_t vocab_begin, char* scratch,
                       const ScratchLayout& l, cudaStream_t stream) {
  if (grad_dtype == DType::kF32) {
    return BackwardT(static_cast<float*>(dwte), static_cast<float*>(dwpe), dout, tokens, batch,
                     seq, channels, vocab_rows, vocab_begin, scratch, l, stream);
  }
  return BackwardT(static_cast<bf16*>(dwte), static_cast<bf16*>(dwpe), dout, tokens, batch, seq,
                   channels, vocab_rows, vocab_begin, scratch, l, stream);
}

}  // namespace

absl::Status LaunchEmbeddingForward(void* out, const int32_t* tokens, const void* wte,
                                    const void* wpe, DType dtype, int64_t batch, int64_t seq,
                                    int64_t channels, int64_t vocab_rows, cudaStream_t stream) {
  return Forward<false>(out, tokens, wte, wpe, dtype, batch, seq, channels, vocab_rows, 0,
                        stream);
}

absl::Status LaunchVocabEmbeddingForward(void* out, const int32_t* tokens, const void* wte_shard,
                                         const void* wpe, DType dtype, int64_t batch,
                                         int64_t seq, int64_t channels, int64_t shard_rows,
                                         int64_t vocab_begin, cudaStream_t stream) {
  return Forward<true>(out, tokens, wte_shard, wpe, dtype, batch, seq, channels, shard_rows,
                       vocab_begin, stream);
}

absl::StatusOr<size_t> EmbeddingBackwardScratchBytes(int64_t positions, int64_t vocab_rows) {
  WEFT_ASSIGN_OR_RETURN(ScratchLayout l, Layout(positions, vocab_rows));
  return l.total;
}

absl::Status LaunchEmbeddingBackward(void* dwte, void* dwpe, DType grad_dtype, const void* dout,
                                     DType dtype, const int32_t* tokens, int64_t batch,
                                     int64_t seq, int64_t channels, int64_t vocab_rows,
                                     int64_t vocab_begin, void* scratch, size_t scratch_bytes,
                                     cudaStream_t stream) {
  if (batch * seq * channels == 0) return absl::OkStatus();
  WEFT_ASSIGN_OR_RETURN(ScratchLayout l, Layout(batch * seq, vocab_rows));
  if (scratch_bytes < l.total) {
    return Internal("embedding backward scratch too small");
  }
  char* s = static_cast<char*>(scratch);
  const int b = static_cast<int>(batch), t = static_cast<int>(seq), c = static_cast<int>(channels);
  if (dtype == DType::kF32) {
    return BackwardG(dwte, dwpe, grad_dtype, static_cast<const float*>(dout), tokens, b, t, c,
                     vocab_rows, vocab_begin, s, l, stream);
  }
  return BackwardG(dwte, dwpe, grad_dtype, static_cast<const bf16*>(dout), tokens, b, t, c,
                   vocab_rows, vocab_begin, s, l, stream);
}

}  // namespace weft::cuda
