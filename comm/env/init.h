// InitDistributed: the store and the world process group for this process,
// from its DistributedEnv.
//
//   WEFT_ASSIGN_OR_RETURN(DistributedContext dist, InitDistributedFromEnv({.backend = "gloo"}));
//   dist.world->AllReduce(t)->Wait();
//
// Store: a HashStore for a single process; otherwise a TcpStore at
// MASTER_ADDR:MASTER_PORT, hosted by rank 0 unless the launcher hosts it.
// Group defaults filled in from the env: gloo binds to the address
// bind_address.h picks (127.0.0.1 on one node; --gloo_iface /
// GLOO_SOCKET_IFNAME; else the interface that routes to MASTER_ADDR);
// nccl uses cuda:LOCAL_RANK.
// The binary must link the backend it names (//comm/gloo, //comm/nccl).
#ifndef WEFT_COMM_ENV_INIT_H_
#define WEFT_COMM_ENV_INIT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "comm/env/bind_address.h"
#include "comm/env/store_watchdog.h"
#include "comm/env/dist_env.h"
#include "comm/process_group/options.h"
#include "comm/process_group/process_group.h"
#include "comm/store/store.h"

namespace weft::comm {

struct InitOptions {
  std::string backend = "gloo";
  // Bound on connecting to the store and creating the world group, and the
  // store's default timeout.
  absl::Duration timeout = absl::Minutes(5);
  // The world group's options (name "world"); timeout defaults to `timeout`.
  ProcessGroupOptions group;
  // The network interface gloo binds to (--gloo_iface); empty: see above.
  std::string gloo_iface;
};

struct DistributedContext {
  DistributedEnv env;
  std::shared_ptr<Store> store;
  std::shared_ptr<ProcessGroup> world;
  // Where this rank's gloo groups listen; every later group must use it.
  BindAddress bind;
  // Under a launcher that hosts the store: the check that it is still there.
  std::shared_ptr<StoreWatchdog> watchdog;
};

absl::StatusOr<DistributedContext> InitDistributed(const DistributedEnv& env,
                                                   InitOptions options = {});
// ReadDistributedEnv() + InitDistributed().
absl::StatusOr<DistributedContext> InitDistributedFromEnv(InitOptions options = {});

}  // namespace weft::comm

#endif  // WEFT_COMM_ENV_INIT_H_
