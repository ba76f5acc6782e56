// Sharding export: where every piece of model and optimizer state lives.
//
// Each rank lists the pieces it holds, from its optimizer's targets (which
// strategies re-place: whole parameters for ddp, flat ranges for zero and
// fsdp, tensor-parallel boxes for tp). A piece names the global tensor, its
// global shape, the box of the global tensor the rank's local tensor covers
// (tensor-parallel Shard placements), the row-major range of that box it
// holds (flat shards), and which replica it is among ranks holding the same
// range. Reading every rank's pieces is enough to rebuild every full tensor,
// under any strategy mix, which is what checkpoint/ writes and reshards.
//
// Names: a parameter's value is "<param>" (the f32 master when the
// optimizer keeps one, else the value itself); optimizer state is
// "<param>:exp_avg", "<param>:exp_avg_sq".
#ifndef WEFT_CORE_PARALLEL_SHARDING_EXPORT_H_
#define WEFT_CORE_PARALLEL_SHARDING_EXPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/optim/optimizer.h"
#include "core/tensor/tensor.h"

namespace weft {

struct PieceInfo {
  std::string name;
  Shape global_shape;
  std::vector<int64_t> box_offsets;  // the local tensor's box in the global tensor
  Shape box_shape;
  int64_t begin = 0, end = 0;        // row-major range of the box held here
  int replica = 0;                   // 0 on exactly one holder of this range
  std::vector<int> mesh_coords;      // the holder's mesh coordinates (empty: no mesh)
};

struct StatePiece {
  PieceInfo info;
  Tensor data;  // end - begin elements, flat, on the device
};

// Every piece this rank holds, by optimizer target.
absl::StatusOr<std::vector<StatePiece>> ExportState(const Optimizer& optimizer,
                                                    const std::vector<int>& mesh_coords);

// One piece with its values on the host, as f32 (what crosses processes).
struct HostPiece {
  PieceInfo info;
  std::vector<float> values;
};
absl::StatusOr<std::vector<HostPiece>> ToHost(const std::vector<StatePiece>& pieces);

// Rebuilds full tensors (row-major f32, by name) from the pieces of all
// ranks. Replica-0 pieces must cover every element exactly once; other
// replicas must agree with them (to `replica_tol`, relative to max(1, |x|)).
absl::StatusOr<std::map<std::string, std::vector<float>>> Reassemble(
    const std::vector<HostPiece>& pieces, double replica_tol = 0.0);

}  // namespace weft

#endif  // WEFT_CORE_PARALLEL_SHARDING_EXPORT_H_
