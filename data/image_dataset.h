// ImageClassificationDataset: 8-bit grayscale images with integer labels,
// held in memory (Fashion-MNIST's 60000 x 28 x 28 is 47 MB), e.g. from the
// IDX files of Debian's dataset-fashion-mnist package.
//
// Fields: "image" float32 of shape [rows * cols] (flat, ready for an MLP;
// View it as [B, 1, rows, cols] for a conv net) and "label" int32 scalar.
// Pixels become p / 255 in [0, 1] (kUnitRange), or (p / 255 - mean) / std
// (kStandardize; the defaults are Fashion-MNIST's training-set statistics).
#ifndef WEFT_DATA_IMAGE_DATASET_H_
#define WEFT_DATA_IMAGE_DATASET_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/dataset.h"

namespace weft::data {

// Mean and standard deviation of p / 255 over Fashion-MNIST's 60000 training images.
inline constexpr float kFashionMnistMean = 0.2860406f;
inline constexpr float kFashionMnistStd = 0.3530242f;
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

enum class PixelScaling { kUnitRange, kStandardize };

struct ImageDatasetOptions {
  PixelScaling scaling = PixelScaling::kUnitRange;
  float mean = kFashionMnistMean;  // for kStandardize
  float std = kFashionMnistStd;
  int num_classes = 10;            // every label must be < num_classes
};

class ImageClassificationDataset : public Dataset {
 public:
  // `pixels` holds num_images * rows * cols bytes, `labels` num_images bytes.
  static absl::StatusOr<std::shared_ptr<ImageClassificationDataset>> Create(
      std::string name, std::vector<uint8_t> pixels, std::vector<uint8_t> labels, int64_t rows,
      int64_t cols, const ImageDatasetOptions& options);
  // Reads an IDX image file ([N, rows, cols]) and a label file ([N]).
  static absl::StatusOr<std::shared_ptr<ImageClassificationDataset>> FromIdxFiles(
      const std::string& images_path, const std::string& labels_path,
      const ImageDatasetOptions& options);

  int64_t num_samples() const override { return static_cast<int64_t>(labels_.size()); }
  std::vector<FieldSpec> fields() const override;
  absl::Status Fill(int64_t index, absl::Span<void* const> dst) const override;
  std::string Describe() const override;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int num_classes() const { return num_classes_; }

 private:
  ImageClassificationDataset(std::string name, std::vector<uint8_t> pixels,
                             std::vector<uint8_t> labels, int64_t rows, int64_t cols,
                             const ImageDatasetOptions& options);

  std::string name_;
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
  int64_t rows_;
  int64_t cols_;
  int num_classes_;
  std::array<float, 256> lut_;  // byte -> normalized float
};

// Fashion-MNIST's training (60000) or test (10000) split from `dir`, which
// holds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
absl::StatusOr<std::shared_ptr<ImageClassificationDataset>> OpenFashionMnist(
    const std::string& dir, bool train, const ImageDatasetOptions& options = {});

}  // namespace weft::data

#endif  // WEFT_DATA_IMAGE_DATASET_H_
