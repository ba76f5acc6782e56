#include "strategies/pp/stage_split.h"

#include <vector>

#include "gtest/gtest.h"

namespace weft::pp {
namespace {

TEST(StageSplitTest, ByCountPartsDifferByAtMostOne) {
  EXPECT_EQ(*SplitByCount(14, 4), (std::vector<int>{0, 4, 8, 11, 14}));
  EXPECT_EQ(*SplitByCount(4, 4), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(SplitByCount(3, 4).ok());
}

// Brute force over every split: the smallest possible largest part.
double BestMax(const std::vector<double>& c, int parts, int from = 0) {
  if (parts == 1) {
    double s = 0;
    for (size_t i = from; i < c.size(); ++i) s += c[i];
    return s;
  }
  double best = 1e300, head = 0;
  for (int end = from + 1; end <= static_cast<int>(c.size()) - (parts - 1); ++end) {
    head += c[end - 1];
    best = std::min(best, std::max(head, BestMax(c, parts - 1, end)));
  }
  return best;
}

TEST(StageSplitTest, ByCostMinimizesTheLargestPart) {
  // A GPT: a big embedding, equal blocks, a head tied to the embedding.
  const std::vector<double> gpt = {40, 7, 7, 7, 7, 7, 7, 7, 7, 1};
  for (int parts : {2, 3, 4}) {
    auto b = SplitByCost(gpt, parts);
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(b->size(), static_cast<size_t>(parts + 1));
    double worst = 0;
    for (int i = 0; i < parts; ++i) {
      double s = 0;
      for (int k = (*b)[i]; k < (*b)[i + 1]; ++k) s += gpt[k];
      EXPECT_LT((*b)[i], (*b)[i + 1]) << "every part holds a stage";
      worst = std::max(worst, s);
    }
    EXPECT_EQ(worst, BestMax(gpt, parts)) << parts << " parts";
  }
  const std::vector<double> heavy_first = {10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ((*SplitByCost(heavy_first, 2))[1], 1) << "the heavy stage alone is the first part";
}

TEST(StageSplitTest, DescribeNamesTheRanges) {
  const std::vector<std::string> names = {"embed", "blocks.0", "blocks.1", "head"};
  EXPECT_EQ(DescribeSplit(names, {4, 1, 1, 2}, {0, 1, 4}),
            "part 0: embed (1 stage, cost 4) | part 1: blocks.0..head (3 stages, cost 4)");
}

}  // namespace
}  // namespace weft::pp
