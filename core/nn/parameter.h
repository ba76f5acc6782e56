// Parameter: a named weight with its global (logical) shape, its local shape
// on this rank, the tensor forward reads (`value`), the gradient backward
// accumulates into (`grad`), and a placement describing how the global
// tensor is laid out across the device mesh.
//
// `shape()` and `numel()` are the LOCAL piece, which is what every tensor of
// the parameter has (value, grad, flat buffers, ddp buckets); the global
// shape is for checkpoints, init and FLOP counts. A tensor-parallel strategy
// sets a Shard placement before materialization; ZeRO-3/FSDP record their
// FlatShard range and make `value` a view into a gathered flat buffer (or
// leave it undefined while resharded). The global shape never changes,
// which is what lets checkpoints reshard on load.
#ifndef WEFT_CORE_NN_PARAMETER_H_
#define WEFT_CORE_NN_PARAMETER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/nn/placement.h"
#include "core/tensor/tensor.h"

namespace weft {

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
        global_shape_(shape),
        shape_(shape),
        box_shape_(std::move(shape)),
        offsets_(shape_.size(), 0),
        init_(init),
        weight_decay_(weight_decay) {}

  const std::string& local_name() const { return local_name_; }
  // Dotted path from the root ("blocks.3.attn.qkv.weight"); set on registration.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // This rank's piece (what value and grad hold).
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return NumElements(shape_); }
  // The whole logical tensor, and where the local piece sits in it.
  const Shape& global_shape() const { return global_shape_; }
  int64_t global_numel() const { return NumElements(global_shape_); }
  const std::vector<int64_t>& local_offsets() const { return offsets_; }
  // The global elements the local piece covers: shape() less the zero rows
  // of a padded shard (Placement::PaddedShard), a row-major prefix of the
  // local tensor. Exports and checkpoints see only this box.
  const Shape& box_shape() const { return box_shape_; }
  int64_t box_numel() const { return NumElements(box_shape_); }

  const Placement& placement() const { return placement_; }
  // Sets the Shard entries (the local shape follows); only before the value
  // exists, since it changes the shape of every tensor of the parameter.
  absl::Status SetPlacement(Placement placement);
  // Records a flat range (zero-3/fsdp); does not change the local shape.
  void AddFlatShard(const std::string& axis, int64_t begin, int64_t end) {
    placement_.FlatShard(axis, begin, end);
  }
  const InitSpec& init() const { return init_; }
  bool weight_decay() const { return weight_decay_; }
  void set_weight_decay(bool decay) { weight_decay_ = decay; }
  // True when modules other than the owner read this parameter (a tied
  // embedding): its gradient is final only after the owner's backward, and
  // sharding strategies must keep it gathered across the whole step.
  bool shared() const { return shared_; }
  void MarkShared() { shared_ = true; }
  // False when another rank holds this parameter (a pipeline stage placed
  // elsewhere): Module::Parameters() leaves it out, so strategies,
  // optimizers, gradient norms and checkpoints see only what this rank has.
  bool held() const { return held_; }
  void set_held(bool held) { held_ = held; }
  // Copies of one parameter on several ranks of a model-parallel axis (a
  // tied embedding on the first and last pipeline stage): 0 on the rank
  // that owns it, k > 0 on the others, which leave it out of gradient norms
  // and save it as a replica. Their gradients are summed by the strategy;
  // -1 (the default) is a parameter without copies.
  int copy_index() const { return copy_index_; }
  void set_copy_index(int k) { copy_index_ = k; }
  // Sharding strategies flatten such a parameter on its own, so that every
  // copy has the same shard layout and the gradients sum elementwise.
  bool has_copies() const { return copy_index_ >= 0; }
  // Identical replicas across model-parallel ranks (a LayerNorm weight on
  // every tensor-parallel rank): 0 on one of them, k > 0 on the others,
  // which save it as a replica. Unlike copy_index, every holder has the
  // complete gradient, so each counts it in its own gradient norm.
  int mp_replica() const { return mp_replica_; }
  void set_mp_replica(int k) { mp_replica_ = k; }

  Tensor value;  // what Forward reads (compute dtype); may be a view or a shard
  Tensor grad;   // accumulated by Backward (grad dtype)

 private:
  std::string local_name_;
  std::string name_;
  Shape global_shape_;
  Shape shape_;  // local
  Shape box_shape_;
  std::vector<int64_t> offsets_;
  Placement placement_;
  InitSpec init_;
  bool weight_decay_;
  bool shared_ = false;
  bool held_ = true;
  int copy_index_ = -1;
  int mp_replica_ = 0;
};

// Fills elements [offset, offset + out.numel()) of `param`'s flattened
// GLOBAL initial value into the f32 CPU tensor `out`; the result is
// identical to slicing a full initialization.
absl::Status InitParameterSlice(const Parameter& param, uint64_t seed, int64_t offset,
                                Tensor& out);
// Fills the f32 CPU tensor `out` (the local shape) with this rank's piece
// of the global initial value: exactly the same numbers as the same box of
// a single-process initialization.
absl::Status InitLocalValue(const Parameter& param, uint64_t seed, Tensor& out);

}  // namespace weft

#endif  // WEFT_CORE_NN_PARAMETER_H_
