// Parameter: a named weight with its full logical shape, the tensor forward
// reads (`value`), the gradient backward accumulates into (`grad`), and a
// placement describing how the value is laid out across a device mesh.
//
// Strategies re-place parameters: ZeRO-3/FSDP make `value` a view into a
// gathered flat buffer (or leave it undefined while resharded), tensor
// parallelism shards it. The logical `shape` never changes, which is what lets
// checkpoints reshard on load.
#ifndef WEFT_CORE_NN_PARAMETER_H_
#define WEFT_CORE_NN_PARAMETER_H_

#include <cstdint>
#include <string>

#include "core/tensor/tensor.h"

namespace weft {

// The DTensor idea, reduced to what strategies and checkpoints need.
struct Placement {
  enum class Kind { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int dim = 0;            // kShard: the sharded tensor dimension
  std::string mesh_axis;  // kShard/kPartial: the mesh axis it spans
  std::string ToString() const;  // "Replicate", "Shard(0)@tp", "Partial@dp"
};

// How a parameter is initialized. Values are a pure function of
// (seed, parameter name, element index), so every rank and every sharding
// produces the same numbers without communication.
struct InitSpec {
  enum class Kind { kNormal, kZeros, kOnes };
  Kind kind = Kind::kNormal;
  float std = 0.02f;
  static InitSpec Normal(float std) { return {Kind::kNormal, std}; }
  static InitSpec Zeros() { return {Kind::kZeros, 0.f}; }
  static InitSpec Ones() { return {Kind::kOnes, 0.f}; }
};

class Parameter {
 public:
  Parameter(std::string local_name, Shape shape, InitSpec init, bool weight_decay)
      : local_name_(std::move(local_name)),
        shape_(std::move(shape)),
        init_(init),
        weight_decay_(weight_decay) {}

  const std::string& local_name() const { return local_name_; }
  // Dotted path from the root ("blocks.3.attn.qkv.weight"); set on registration.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  const Shape& shape() const { return shape_; }
  int64_t numel() const { return NumElements(shape_); }
  const InitSpec& init() const { return init_; }
  bool weight_decay() const { return weight_decay_; }
  void set_weight_decay(bool decay) { weight_decay_ = decay; }
  // True when modules other than the owner read this parameter (a tied
  // embedding): its gradient is final only after the owner's backward, and
  // sharding strategies must keep it gathered across the whole step.
  bool shared() const { return shared_; }
  void MarkShared() { shared_ = true; }

  Tensor value;  // what Forward reads (compute dtype); may be a view or a shard
  Tensor grad;   // accumulated by Backward (grad dtype)
  Placement placement;

 private:
  std::string local_name_;
  std::string name_;
  Shape shape_;
  InitSpec init_;
  bool weight_decay_;
  bool shared_ = false;
};

// Fills elements [offset, offset + out.numel()) of `param`'s flattened
// initial value into the f32 CPU tensor `out`. Sharded owners pass their
// slice; the result is identical to slicing a full initialization.
absl::Status InitParameterSlice(const Parameter& param, uint64_t seed, int64_t offset,
                                Tensor& out);

}  // namespace weft

#endif  // WEFT_CORE_NN_PARAMETER_H_
