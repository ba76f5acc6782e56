#include "checkpoint/piece_runs.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace weft::ckpt {
namespace {

// Reference: the global index of every element of a piece, one by one.
std::vector<int64_t> Elements(const PieceGeometry& p) {
  std::vector<int64_t> out;
  const int nd = static_cast<int>(p.global_shape.size());
  for (int64_t i = p.begin; i < p.end; ++i) {
    int64_t rest = i, g = 0, stride = 1;
    std::vector<int64_t> local(nd);
    for (int d = nd - 1; d >= 0; --d) {
      local[d] = rest % p.box_shape[d];
      rest /= p.box_shape[d];
    }
    for (int d = nd - 1; d >= 0; --d) {
      g += (p.box_offsets[d] + local[d]) * stride;
      stride *= p.global_shape[d];
    }
    out.push_back(g);
  }
  return out;
}

std::vector<int64_t> Expand(const std::vector<IndexRun>& runs) {
  std::vector<int64_t> out;
  int64_t next_local = 0;
  for (const IndexRun& r : runs) {
    EXPECT_EQ(r.local, next_local);
    for (int64_t k = 0; k < r.length; ++k) out.push_back(r.global + k);
    next_local += r.length;
  }
  return out;
}

TEST(PieceRunsTest, WholeTensorRangeIsOneRun) {
  PieceGeometry p{{6, 4}, {0, 0}, {6, 4}, 5, 19};
  const std::vector<IndexRun> runs = GlobalRuns(p);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].global, 5);
  EXPECT_EQ(runs[0].length, 14);
}

TEST(PieceRunsTest, MatchesElementByElementForBoxesAndRanges) {
  const std::vector<int64_t> shape = {4, 6, 5};
  const std::vector<std::vector<int64_t>> offsets = {{0, 0, 0}, {2, 0, 0}, {0, 3, 0}, {1, 2, 1}};
  const std::vector<std::vector<int64_t>> boxes = {{4, 6, 5}, {2, 6, 5}, {4, 3, 5}, {2, 3, 3}};
  for (size_t k = 0; k < offsets.size(); ++k) {
    int64_t n = 1;
    for (int64_t d : boxes[k]) n *= d;
    for (int64_t begin : {int64_t{0}, int64_t{3}, n / 2}) {
      for (int64_t end : {n, n - 1, n / 2 + 4}) {
        if (end <= begin) continue;
        PieceGeometry p{shape, offsets[k], boxes[k], begin, end};
        EXPECT_EQ(Expand(GlobalRuns(p)), Elements(p)) << "box " << k << " [" << begin << "," << end << ")";
      }
    }
  }
}

TEST(PieceRunsTest, IntersectFindsExactlyTheSharedElements) {
  // Saved: a column split of a 6x8 matrix (tensor parallel); loaded: a flat
  // range of the whole matrix (fsdp).
  PieceGeometry saved{{6, 8}, {0, 4}, {6, 4}, 2, 21};
  PieceGeometry local{{6, 8}, {0, 0}, {6, 8}, 10, 40};
  const std::vector<Overlap> ov = Intersect(GlobalRuns(local), GlobalRuns(saved));
  const std::vector<int64_t> le = Elements(local), se = Elements(saved);
  std::vector<std::pair<int64_t, int64_t>> expected;  // (local idx, saved idx)
  for (size_t i = 0; i < le.size(); ++i) {
    for (size_t j = 0; j < se.size(); ++j) {
      if (le[i] == se[j]) expected.push_back({int64_t(i), int64_t(j)});
    }
  }
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const Overlap& o : ov) {
    for (int64_t k = 0; k < o.length; ++k) got.push_back({o.a_local + k, o.b_local + k});
  }
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(expected.empty());
}

TEST(PieceRunsTest, ScalarsAndEmptyRanges) {
  EXPECT_EQ(GlobalRuns({{}, {}, {}, 0, 1}).size(), 1u);
  EXPECT_TRUE(GlobalRuns({{4}, {0}, {4}, 2, 2}).empty());
}

}  // namespace
}  // namespace weft::ckpt
