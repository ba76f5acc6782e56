#include "data/batch.h"

#include <string>

#include "core/base/check.h"
#include "core/base/status_macros.h"

namespace weft::data {

const Tensor& Batch::Get(absl::string_view name) const {
  std::string names;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if ((*fields_)[i].name == name) return tensors_[i];
    names += (i ? ", " : "") + (*fields_)[i].name;
  }
  WEFT_CHECK(false) << "batch has no field '" << name << "'; fields: " << names;
  return tensors_[0];
}

absl::Status Batch::WaitOn(const Stream& compute) const {
  if (ready_ == nullptr) return absl::OkStatus();
  WEFT_RETURN_IF_ERROR(compute.Wait(*ready_));
  // The memory came from the copy stream's pool: without this, freeing the
  // batch would let the next copy reuse it while compute still reads it.
  for (const Tensor& t : tensors_) {
    Allocator* allocator = t.storage()->allocator();
    if (allocator != nullptr) {
      WEFT_RETURN_IF_ERROR(allocator->RecordStream(t.storage()->data(), compute.native()));
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::data
