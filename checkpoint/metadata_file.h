// metadata.pb's bytes: the serialized Metadata followed by its own CRC-32C
// (field metadata_crc32c, appended last), so corruption of the metadata is
// caught like corruption of a data file, not read as another checkpoint.
#ifndef WEFT_CHECKPOINT_METADATA_FILE_H_
#define WEFT_CHECKPOINT_METADATA_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "checkpoint/checkpoint.pb.h"

namespace weft::ckpt {

// The bytes to write as metadata.pb: `meta` (its metadata_crc32c ignored)
// with the CRC-32C of those bytes appended as metadata_crc32c.
std::string SerializeMetadata(const Metadata& meta);

// Parses metadata.pb's bytes and checks the appended CRC-32C when there is
// one (files written before it existed have none). `path` names the file in
// errors: InvalidArgument for bytes that are not weft metadata, DataLoss
// for a checksum that does not match.
absl::StatusOr<Metadata> ParseMetadata(const std::string& path, const std::string& bytes);

}  // namespace weft::ckpt

#endif  // WEFT_CHECKPOINT_METADATA_FILE_H_
