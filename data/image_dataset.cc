#include "data/image_dataset.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/file_util.h"
#include "data/idx_file.h"

namespace weft::data {

ImageClassificationDataset::ImageClassificationDataset(std::string name,
                                                       std::vector<uint8_t> pixels,
                                                       std::vector<uint8_t> labels, int64_t rows,
                                                       int64_t cols,
                                                       const ImageDatasetOptions& options)
    : name_(std::move(name)),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      rows_(rows),
      cols_(cols),
      num_classes_(options.num_classes) {
  for (int p = 0; p < 256; ++p) {
    const float x = static_cast<float>(p) / 255.0f;
    lut_[p] = options.scaling == PixelScaling::kUnitRange ? x : (x - options.mean) / options.std;
  }
}

absl::StatusOr<std::shared_ptr<ImageClassificationDataset>> ImageClassificationDataset::Create(
    std::string name, std::vector<uint8_t> pixels, std::vector<uint8_t> labels, int64_t rows,
    int64_t cols, const ImageDatasetOptions& options) {
  if (options.num_classes < 1 || options.num_classes > 256) {
    return InvalidArgument(absl::StrCat(options.num_classes, " classes"), "1 to 256 classes");
  }
  if (options.scaling == PixelScaling::kStandardize && !(options.std > 0)) {
    return InvalidArgument(absl::StrCat("pixel std ", options.std), "a positive std");
  }
  const size_t n = labels.size();
  if (n == 0 || rows <= 0 || cols <= 0) {
    return InvalidArgument(absl::StrCat(name, ": ", n, " images of ", rows, "x", cols),
                           "at least one image with positive size");
  }
  if (pixels.size() != n * static_cast<size_t>(rows * cols)) {
    return InvalidArgument(absl::StrCat(name, ": ", pixels.size(), " pixel bytes for ", n,
                                        " labels of ", rows, "x", cols, " images"),
                           absl::StrCat(n * rows * cols, " bytes (one image per label)"),
                           "the image and label files belong to different splits?");
  }
  for (size_t i = 0; i < n; ++i) {
    if (labels[i] >= options.num_classes) {
      return InvalidArgument(
          absl::StrCat(name, ": label ", int{labels[i]}, " of image ", i),
          absl::StrCat("labels in [0, ", options.num_classes, ")"));
    }
  }
  return std::shared_ptr<ImageClassificationDataset>(new ImageClassificationDataset(
      std::move(name), std::move(pixels), std::move(labels), rows, cols, options));
}

absl::StatusOr<std::shared_ptr<ImageClassificationDataset>>
ImageClassificationDataset::FromIdxFiles(const std::string& images_path,
                                         const std::string& labels_path,
                                         const ImageDatasetOptions& options) {
  WEFT_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  WEFT_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  if (images.dims.size() != 3) {
    return InvalidArgument(absl::StrCat("'", images_path, "' has ", images.dims.size(),
                                        " dimensions"),
                           "3 ([images, rows, cols])", "is this the labels file?");
  }
  if (labels.dims.size() != 1) {
    return InvalidArgument(absl::StrCat("'", labels_path, "' has ", labels.dims.size(),
                                        " dimensions"),
                           "1 ([images])", "is this the images file?");
  }
  if (images.dims[0] != labels.dims[0]) {
    return InvalidArgument(absl::StrCat("'", images_path, "' holds ", images.dims[0],
                                        " images but '", labels_path, "' ", labels.dims[0],
                                        " labels"),
                           "one label per image", "the files belong to different splits?");
  }
  return Create(images_path, std::move(images.values), std::move(labels.values), images.dims[1],
                images.dims[2], options);
}

std::vector<FieldSpec> ImageClassificationDataset::fields() const {
  return {{"image", DType::kF32, {rows_ * cols_}}, {"label", DType::kI32, {}}};
}

absl::Status ImageClassificationDataset::Fill(int64_t index, absl::Span<void* const> dst) const {
  if (index < 0 || index >= num_samples() || dst.size() != 2) {
    return InvalidArgument(absl::StrCat("sample ", index, " with ", dst.size(), " field buffers"),
                           absl::StrCat("an index in [0, ", num_samples(), ") and 2 buffers"));
  }
  const int64_t pixels = rows_ * cols_;
  const uint8_t* src = pixels_.data() + index * pixels;
  auto* image = static_cast<float*>(dst[0]);
  for (int64_t i = 0; i < pixels; ++i) image[i] = lut_[src[i]];
  const int32_t label = labels_[index];
  std::memcpy(dst[1], &label, sizeof(label));
  return absl::OkStatus();
}

std::string ImageClassificationDataset::Describe() const {
  return absl::StrCat(num_samples(), " images of ", rows_, "x", cols_, ", ", num_classes_,
                      " classes, from ", name_);
}

absl::StatusOr<std::shared_ptr<ImageClassificationDataset>> OpenFashionMnist(
    const std::string& dir, bool train, const ImageDatasetOptions& options) {
  const std::string prefix = train ? "train" : "t10k";
  // Debian ships .gz; accept uncompressed copies too.
  const auto pick = [&](const std::string& stem) {
    const std::string gz = JoinPath(dir, stem + ".gz");
    return FileExists(gz) ? gz : JoinPath(dir, stem);
  };
  const std::string images = pick(prefix + "-images-idx3-ubyte");
  const std::string labels = pick(prefix + "-labels-idx1-ubyte");
  if (!FileExists(images) || !FileExists(labels)) {
    return NotFound(absl::StrCat("Fashion-MNIST ", prefix, " files not found in '", dir, "'"),
                    absl::StrCat(prefix, "-images-idx3-ubyte.gz and ", prefix,
                                 "-labels-idx1-ubyte.gz"),
                    "apt-get install dataset-fashion-mnist (files land in "
                    "/usr/share/datasets/fashion-mnist)");
  }
  return ImageClassificationDataset::FromIdxFiles(images, labels, options);
}

}  // namespace weft::data
