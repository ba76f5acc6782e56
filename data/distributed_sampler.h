// DistributedSampler: PyTorch's torch.utils.data.DistributedSampler semantics.
//
// Each epoch has one global order `perm` of the N sample indices: a
// permutation drawn from (seed, epoch) when shuffling, else 0..N-1. It is
// made a multiple of the global batch G (the samples all ranks consume
// together per step; G = W unless set), either by dropping the tail
// (drop_last) or by wrapping around to its start (padding repeats samples),
// and rank r takes perm[r], perm[r + W], perm[r + 2W], ... Ranks are
// disjoint (up to padding) and together cover every sample.
//
// The invariant training relies on: if every rank consumes G/W consecutive
// samples of its partition per optimizer step, the union over ranks of step
// s is exactly perm[s*G, (s+1)*G) whatever W is, so the math of a step does
// not depend on the world size. Cutting the epoch to a multiple of G (not
// of W, or of each rank's micro-batch) keeps that true across epoch
// boundaries: every W ends every epoch after the same samples, on a step
// boundary.
//
// The permutation is a Fisher-Yates shuffle driven by SplitMix64 with a
// bounded draw that has no modulo bias. It is deterministic across machines
// and compilers (no std::shuffle or std::uniform_int_distribution, whose
// outputs are implementation-defined), but it is not torch.randperm's order.
#ifndef WEFT_DATA_DISTRIBUTED_SAMPLER_H_
#define WEFT_DATA_DISTRIBUTED_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::data {

struct SamplerOptions {
  int64_t num_samples = 0;  // N, the dataset size
  int world_size = 1;
  int rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
  // Samples per step over all ranks (a multiple of world_size); the epoch
  // is cut or padded to a multiple of it. 0: world_size.
  int64_t global_batch = 0;
};

class DistributedSampler {
 public:
  static absl::StatusOr<DistributedSampler> Create(const SamplerOptions& options);

  // Changes the order of later Indices() calls, like PyTorch's set_epoch.
  void SetEpoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // Samples per rank per epoch: floor(N/G)*G/W with drop_last, else ceil(N/G)*G/W.
  int64_t num_samples_per_rank() const { return per_rank_; }
  // per_rank * W: the length of the (truncated or padded) global order.
  int64_t total_size() const { return per_rank_ * options_.world_size; }
  const SamplerOptions& options() const { return options_; }

  // This rank's sample indices for the current epoch, in order.
  std::vector<int64_t> Indices() const;
  // The global order for the current epoch, truncated or padded to total_size().
  std::vector<int64_t> GlobalOrder() const;

  // The epoch's permutation of [0, n) before truncation or padding.
  static std::vector<int64_t> Permutation(int64_t n, uint64_t seed, int64_t epoch, bool shuffle);

 private:
  DistributedSampler(SamplerOptions options, int64_t per_rank)
      : options_(options), per_rank_(per_rank) {}

  SamplerOptions options_;
  int64_t per_rank_;
  int64_t epoch_ = 0;
};

}  // namespace weft::data

#endif  // WEFT_DATA_DISTRIBUTED_SAMPLER_H_
