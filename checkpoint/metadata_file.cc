#include "checkpoint/metadata_file.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/crc32c.h"
#include "core/base/errors.h"

namespace weft::ckpt {
namespace {

// The field's own encoding (tag and four bytes): protobuf merges fields
// appended to a message, so the file parses as one Metadata.
std::string ChecksumField(uint32_t crc) {
  Metadata only;
  only.set_metadata_crc32c(crc);
  return only.SerializeAsString();
}

}  // namespace

std::string SerializeMetadata(const Metadata& meta) {
  Metadata body = meta;
  body.clear_metadata_crc32c();
  std::string bytes = body.SerializeAsString();
  bytes += ChecksumField(Crc32c(bytes.data(), bytes.size()));
  return bytes;
}

absl::StatusOr<Metadata> ParseMetadata(const std::string& path, const std::string& bytes) {
  Metadata meta;
  if (!meta.ParseFromString(bytes) || meta.format() != "weft-checkpoint") {
    return InvalidArgument(absl::StrCat(path, " is not weft checkpoint metadata"),
                           "a metadata.pb written by weft (format \"weft-checkpoint\")",
                           "the file is corrupt or truncated; resume from an earlier step");
  }
  if (!meta.has_metadata_crc32c()) return meta;
  const std::string field = ChecksumField(meta.metadata_crc32c());
  const bool at_end = absl::EndsWith(bytes, field);
  const size_t body = at_end ? bytes.size() - field.size() : bytes.size();
  const uint32_t crc = Crc32c(bytes.data(), body);
  if (!at_end || crc != meta.metadata_crc32c()) {
    return MakeError(absl::StatusCode::kDataLoss,
                     absl::StrCat(path, ": checksum mismatch (CRC-32C ", crc, " of its first ", body,
                                  " bytes, the file says ", meta.metadata_crc32c(),
                                  at_end ? "" : " but not as its last field", ")"),
                     "metadata.pb exactly as weft wrote it",
                     "the file is corrupt; resume from an earlier step");
  }
  return meta;
}

}  // namespace weft::ckpt
