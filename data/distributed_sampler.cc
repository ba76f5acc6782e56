#include "data/distributed_sampler.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"

namespace weft::data {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) by Lemire's multiply-and-reject (no modulo bias).
uint64_t Bounded(uint64_t* state, uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(SplitMix64(state)) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = -bound % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(SplitMix64(state)) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

}  // namespace

absl::StatusOr<DistributedSampler> DistributedSampler::Create(const SamplerOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument(
        absl::StrCat("rank ", options.rank, " of world size ", options.world_size),
        "world_size >= 1 and 0 <= rank < world_size");
  }
  if (options.num_samples <= 0) {
    return InvalidArgument(absl::StrCat("dataset of ", options.num_samples, " samples"),
                           "at least one sample", "the corpus is shorter than one sequence?");
  }
  const int64_t n = options.num_samples;
  const int64_t w = options.world_size;
  const int64_t g = options.global_batch > 0 ? options.global_batch : w;
  if (g % w != 0) {
    return InvalidArgument(
        absl::StrCat("global batch of ", g, " samples over ", w, " ranks"),
        "a global batch divisible by the world size", "every rank takes global_batch / world");
  }
  const int64_t total = (options.drop_last ? n / g : (n + g - 1) / g) * g;
  const int64_t per_rank = total / w;
  if (per_rank == 0) {
    return InvalidArgument(
        absl::StrCat("drop_last with ", n, " samples and a global batch of ", g,
                     " leaves no sample per rank"),
        absl::StrCat("at least ", g, " samples"),
        "use a smaller --global_batch or more data");
  }
  return DistributedSampler(options, per_rank);
}

std::vector<int64_t> DistributedSampler::Permutation(int64_t n, uint64_t seed, int64_t epoch,
                                                     bool shuffle) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (!shuffle) return perm;
  // Mix seed and epoch so that neighbouring seeds and epochs give unrelated orders.
  uint64_t state = seed;
  const uint64_t seed_hash = SplitMix64(&state);
  state = seed_hash ^ (static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ull);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(Bounded(&state, static_cast<uint64_t>(i + 1)));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::vector<int64_t> DistributedSampler::GlobalOrder() const {
  std::vector<int64_t> order =
      Permutation(options_.num_samples, options_.seed, epoch_, options_.shuffle);
  const int64_t total = total_size();
  const int64_t n = options_.num_samples;
  if (total <= n) {
    order.resize(total);
  } else {
    // Padding wraps around, repeatedly if the padding exceeds N (N < W - 1).
    order.reserve(total);
    for (int64_t i = n; i < total; ++i) order.push_back(order[i % n]);
  }
  return order;
}

std::vector<int64_t> DistributedSampler::Indices() const {
  const std::vector<int64_t> order = GlobalOrder();
  std::vector<int64_t> mine;
  mine.reserve(per_rank_);
  for (int64_t i = options_.rank; i < total_size(); i += options_.world_size) {
    mine.push_back(order[i]);
  }
  return mine;
}

}  // namespace weft::data
