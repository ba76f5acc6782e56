#include "checkpoint/piece_runs.h"

#include <algorithm>

namespace weft::ckpt {

std::vector<IndexRun> GlobalRuns(const PieceGeometry& p) {
  std::vector<IndexRun> runs;
  if (p.end <= p.begin) return runs;
  const int nd = static_cast<int>(p.global_shape.size());
  if (nd == 0) return {{0, 0, p.end - p.begin}};
  // Dimensions m.. of the box are contiguous in the global tensor when every
  // dimension after m spans the whole global extent.
  int m = nd - 1;
  while (m > 0 && p.box_offsets[m] == 0 && p.box_shape[m] == p.global_shape[m]) --m;
  int64_t seg = 1;  // elements per contiguous segment
  for (int d = m; d < nd; ++d) seg *= p.box_shape[d];
  std::vector<int64_t> gstride(nd, 1);
  for (int d = nd - 2; d >= 0; --d) gstride[d] = gstride[d + 1] * p.global_shape[d + 1];
  const int64_t first = p.begin / seg, last = (p.end - 1) / seg;
  for (int64_t s = first; s <= last; ++s) {
    // Global index of the segment's first element: the outer coordinates of
    // segment s plus the box offsets.
    int64_t g = 0, rest = s;
    for (int d = m - 1; d >= 0; --d) {
      g += (p.box_offsets[d] + rest % p.box_shape[d]) * gstride[d];
      rest /= p.box_shape[d];
    }
    for (int d = m; d < nd; ++d) g += p.box_offsets[d] * gstride[d];
    const int64_t lo = std::max(s * seg, p.begin), hi = std::min((s + 1) * seg, p.end);
    const IndexRun r{g + (lo - s * seg), lo - p.begin, hi - lo};
    if (!runs.empty() && runs.back().global + runs.back().length == r.global) {
      runs.back().length += r.length;
    } else {
      runs.push_back(r);
    }
  }
  return runs;
}

std::vector<Overlap> Intersect(const std::vector<IndexRun>& a, const std::vector<IndexRun>& b) {
  std::vector<Overlap> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].global, b[j].global);
    const int64_t a_end = a[i].global + a[i].length, b_end = b[j].global + b[j].length;
    const int64_t hi = std::min(a_end, b_end);
    if (lo < hi) out.push_back({a[i].local + (lo - a[i].global), b[j].local + (lo - b[j].global), hi - lo});
    if (a_end <= b_end) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

}  // namespace weft::ckpt
