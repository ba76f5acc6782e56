#include "data/tokenizer.h"

#include "core/base/status_macros.h"
#include "data/file_util.h"

namespace weft::data {

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  WEFT_RETURN_IF_ERROR(EncodeAppend(text, &ids));
  return ids;
}

absl::Status Tokenizer::Save(const std::string& path) const {
  return WriteFileAtomically(path, Serialize());
}

}  // namespace weft::data
