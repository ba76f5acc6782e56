// IDX files (the MNIST / Fashion-MNIST container), optionally gzip-compressed
// as Debian's dataset-fashion-mnist ships them.
//
//   bytes 0-1  zero
//   byte  2    element type; only 0x08 (unsigned byte) is supported
//   byte  3    number of dimensions D
//   then D big-endian uint32 sizes, then the elements in row-major order.
#ifndef WEFT_DATA_IDX_FILE_H_
#define WEFT_DATA_IDX_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace weft::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, product(dims) elements
};

// Reads `path`, gzip or plain (detected from the content). Errors name the
// file: bad magic, unsupported type, truncated data, trailing bytes.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// Writes an unsigned-byte IDX file, gzip-compressed when `gzip` (tests and
// tools use this to make small datasets).
absl::Status WriteIdxFile(const std::string& path, absl::Span<const int64_t> dims,
                          absl::Span<const uint8_t> values, bool gzip = true);

}  // namespace weft::data

#endif  // WEFT_DATA_IDX_FILE_H_
