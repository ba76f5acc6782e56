#include "data/image_dataset.h"

#include <string>
#include <vector>

#include "data/file_util.h"
#include "data/idx_file.h"
#include "data/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::data {
namespace {

using ::testing::HasSubstr;

// A 3-image, 2x2 Fashion-MNIST look-alike in `dir`.
void WriteTinyMnist(const std::string& dir, const std::string& prefix, int bad_label = -1) {
  std::vector<uint8_t> pixels = {0, 255, 51, 102, 1, 2, 3, 4, 10, 20, 30, 40};
  std::vector<uint8_t> labels = {7, 0, 9};
  if (bad_label >= 0) labels[1] = static_cast<uint8_t>(bad_label);
  ASSERT_TRUE(WriteIdxFile(JoinPath(dir, prefix + "-images-idx3-ubyte.gz"), {3, 2, 2}, pixels).ok());
  ASSERT_TRUE(WriteIdxFile(JoinPath(dir, prefix + "-labels-idx1-ubyte.gz"), {3}, labels).ok());
}

TEST(ImageDatasetTest, ReadsIdxFilesAndScalesPixelsToUnitRange) {
  const std::string dir = testing::MakeTempDir("mnist");
  WriteTinyMnist(dir, "train");
  auto ds = OpenFashionMnist(dir, /*train=*/true);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->num_samples(), 3);
  EXPECT_EQ((*ds)->fields()[0].shape, (Shape{4}));
  EXPECT_EQ((*ds)->fields()[1].shape, (Shape{}));
  std::vector<float> image(4);
  int32_t label = -1;
  void* dst[2] = {image.data(), &label};
  ASSERT_TRUE((*ds)->Fill(0, dst).ok());
  EXPECT_EQ(label, 7);
  EXPECT_FLOAT_EQ(image[0], 0.0f);
  EXPECT_FLOAT_EQ(image[1], 1.0f);
  EXPECT_FLOAT_EQ(image[2], 0.2f);
  ASSERT_TRUE((*ds)->Fill(2, dst).ok());
  EXPECT_EQ(label, 9);
}

TEST(ImageDatasetTest, StandardizationUsesMeanAndStd) {
  const std::string dir = testing::MakeTempDir("mnist");
  WriteTinyMnist(dir, "t10k");
  ImageDatasetOptions options;
  options.scaling = PixelScaling::kStandardize;
  auto ds = OpenFashionMnist(dir, /*train=*/false, options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  std::vector<float> image(4);
  int32_t label;
  void* dst[2] = {image.data(), &label};
  ASSERT_TRUE((*ds)->Fill(0, dst).ok());
  EXPECT_NEAR(image[0], -kFashionMnistMean / kFashionMnistStd, 1e-6);
  EXPECT_NEAR(image[1], (1.0f - kFashionMnistMean) / kFashionMnistStd, 1e-6);
}

TEST(ImageDatasetTest, BadLabelsAndMismatchedFilesAreErrors) {
  const std::string dir = testing::MakeTempDir("mnist");
  WriteTinyMnist(dir, "train", /*bad_label=*/12);
  auto ds = OpenFashionMnist(dir, true);
  ASSERT_FALSE(ds.ok());
  EXPECT_THAT(ds.status().message(), HasSubstr("label 12 of image 1"));

  ASSERT_TRUE(WriteIdxFile(JoinPath(dir, "x-labels.gz"), {2}, std::vector<uint8_t>{1, 2}).ok());
  auto mismatch = ImageClassificationDataset::FromIdxFiles(
      JoinPath(dir, "train-images-idx3-ubyte.gz"), JoinPath(dir, "x-labels.gz"), {});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.status().message(), HasSubstr("holds 3 images"));

  auto missing = OpenFashionMnist(testing::MakeTempDir("empty"), true);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("apt-get install dataset-fashion-mnist"));
}

}  // namespace
}  // namespace weft::data
