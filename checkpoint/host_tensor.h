// A full (unsharded) tensor on the host as f32, row-major: what consolidated
// checkpoints, safetensors exports and foreign formats (llm.c) exchange.
#ifndef WEFT_CHECKPOINT_HOST_TENSOR_H_
#define WEFT_CHECKPOINT_HOST_TENSOR_H_

#include <cstdint>
#include <vector>

namespace weft::ckpt {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The same row-major elements: equal shapes, or one with its first
// dimension split in two (a packed tensor-parallel layer places a fused
// (3C, C) qkv weight as (3, C, C), and its bias as (3, C), so each rank
// holds whole heads of q, k and v; its checkpoints record that shape).
inline bool SameRowMajorLayout(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a == b) return true;
  const std::vector<int64_t>& longer = a.size() > b.size() ? a : b;
  const std::vector<int64_t>& shorter = a.size() > b.size() ? b : a;
  if (longer.size() != shorter.size() + 1 || shorter.empty()) return false;
  if (longer[0] * longer[1] != shorter[0]) return false;
  for (size_t d = 2; d < longer.size(); ++d) {
    if (longer[d] != shorter[d - 1]) return false;
  }
  return true;
}

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_HOST_TENSOR_H_
