// GlooStoreAdapter: presents a weft Store as the gloo::rendezvous::Store that
// gloo's connectFullMesh rendezvous uses. gloo reports failures by throwing,
// so store errors (a timeout naming the missing keys, a lost TCP store)
// become gloo::IoException carrying the weft message.
#ifndef WEFT_COMM_GLOO_STORE_ADAPTER_H_
#define WEFT_COMM_GLOO_STORE_ADAPTER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "absl/time/time.h"
#include "comm/store/store.h"

namespace weft::comm {

class GlooStoreAdapter : public ::gloo::rendezvous::Store {
 public:
  // `timeout` bounds gets and the waits gloo issues without one.
  GlooStoreAdapter(std::shared_ptr<comm::Store> store, absl::Duration timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<comm::Store> store_;
  absl::Duration timeout_;
};

}  // namespace weft::comm

#endif  // WEFT_COMM_GLOO_STORE_ADAPTER_H_
