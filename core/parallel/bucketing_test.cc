#include "core/parallel/bucketing.h"

#include <memory>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(BucketingTest, ReverseOrderCutAtTheLimitEveryParameterOnce) {
  std::vector<std::unique_ptr<Parameter>> owned;
  std::vector<Parameter*> params;
  for (int64_t n : {100, 300, 50, 200, 10}) {
    owned.push_back(std::make_unique<Parameter>("p" + std::to_string(n), Shape{n},
                                                InitSpec::Zeros(), true));
    params.push_back(owned.back().get());
  }
  // Limit: 1024 bytes of f32 = 256 elements.
  auto buckets = BucketInBackwardOrder(params, 1024.0 / (1 << 20), 4);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0], (std::vector<Parameter*>{params[4], params[3], params[2]}));  // 260
  EXPECT_EQ(buckets[1], (std::vector<Parameter*>{params[1]}));                        // 300
  EXPECT_EQ(buckets[2], (std::vector<Parameter*>{params[0]}));                        // 100
  EXPECT_TRUE(BucketInBackwardOrder({}, 1.0, 4).empty());
}

}  // namespace
}  // namespace weft
