// PrefixStore: a namespace inside another store ("<prefix>/<key>"), so each
// subgroup (a mesh axis, a backend's rendezvous) uses the same keys without
// colliding with the others.
#ifndef WEFT_COMM_STORE_PREFIX_STORE_H_
#define WEFT_COMM_STORE_PREFIX_STORE_H_

#include <memory>
#include <string>

#include "comm/store/store.h"

namespace weft::comm {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : prefix_(std::move(prefix)), base_(std::move(base)) {}

  using Store::Get;
  using Store::Wait;
  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  // Counts every key of the underlying store, not only this prefix's.
  absl::StatusOr<int64_t> NumKeys() override { return base_->NumKeys(); }
  absl::Duration timeout() const override { return base_->timeout(); }

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::string Join(absl::string_view key) const;
  std::vector<std::string> JoinAll(absl::Span<const std::string> keys) const;

  const std::string prefix_;
  const std::shared_ptr<Store> base_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_STORE_PREFIX_STORE_H_
