// Geometry of pieces: which elements of a global tensor a piece holds, as
// runs of consecutive global row-major indices, and where two pieces meet.
// A resharding load intersects each local piece with the saved pieces of
// the same entry and reads only the overlaps.
#ifndef WEFT_CHECKPOINT_PIECE_RUNS_H_
#define WEFT_CHECKPOINT_PIECE_RUNS_H_

#include <cstdint>
#include <vector>

namespace weft::ckpt {

// A piece: the row-major range [begin, end) of a box of the global tensor.
struct PieceGeometry {
  std::vector<int64_t> global_shape;
  std::vector<int64_t> box_offsets;
  std::vector<int64_t> box_shape;
  int64_t begin = 0, end = 0;
};

// `length` consecutive global indices from `global`, which are elements
// [local, local + length) of the piece (counted from its begin).
struct IndexRun {
  int64_t global = 0;
  int64_t local = 0;
  int64_t length = 0;
};

// The piece's elements as runs in increasing order (a box's row-major order
// is increasing in the global order too); adjacent runs are merged, so a
// range of a whole tensor is one run.
std::vector<IndexRun> GlobalRuns(const PieceGeometry& piece);

// Where `a` and `b` hold the same global elements: elements
// [a_local, a_local + length) of a are [b_local, b_local + length) of b.
struct Overlap {
  int64_t a_local = 0;
  int64_t b_local = 0;
  int64_t length = 0;
};
std::vector<Overlap> Intersect(const std::vector<IndexRun>& a, const std::vector<IndexRun>& b);

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_PIECE_RUNS_H_
