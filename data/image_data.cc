// OpenFashionMnistData (data.h): Fashion-MNIST IDX files -> loaders.
#include "core/base/errors.h"
#include "core/base/status_macros.h"
#include "data/data.h"

namespace weft::data {

absl::StatusOr<ImageData> OpenFashionMnistData(const ImageDataOptions& options) {
  WEFT_ASSIGN_OR_RETURN(auto train, OpenFashionMnist(options.dir, /*train=*/true, options.dataset));
  WEFT_ASSIGN_OR_RETURN(auto test, OpenFashionMnist(options.dir, /*train=*/false, options.dataset));
  ImageData out;
  out.num_features = train->rows() * train->cols();
  out.num_classes = train->num_classes();
  WEFT_ASSIGN_OR_RETURN(out.train, DataLoader::Create(std::move(train), options.loader));
  DataLoader::Options test_options = options.loader;
  test_options.shuffle = false;
  test_options.drop_last = false;  // evaluate every test image
  test_options.global_batch = 0;   // and pad no more than the world size needs
  auto test_loader = DataLoader::Create(std::move(test), test_options);
  if (!test_loader.ok()) return Annotate(test_loader.status(), "test split");
  out.test = *std::move(test_loader);
  return out;
}

}  // namespace weft::data
