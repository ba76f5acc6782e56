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

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_HOST_TENSOR_H_
