#include "comm/env/init.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "comm/process_group/registry.h"
#include "comm/store/hash_store.h"
#include "comm/store/tcp_store.h"
#include "comm/util/socket.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::comm {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  return name;
}

}  // namespace

absl::StatusOr<DistributedContext> InitDistributed(const DistributedEnv& env,
                                                   InitOptions options) {
  DistributedContext ctx;
  ctx.env = env;
  if (env.world_size == 1 && !env.launcher_hosts_store) {
    ctx.store = std::make_shared<HashStore>(options.timeout);
  } else {
    TcpStoreOptions store_options;
    store_options.host = env.master_addr;
    store_options.port = env.master_port;
    store_options.is_server = env.rank == 0 && !env.launcher_hosts_store;
    store_options.world_size = env.world_size;
    store_options.rank = env.rank;
    store_options.timeout = options.timeout;
    store_options.connect_timeout = options.timeout;
    auto store = TcpStore::Create(store_options);
    if (!store.ok()) return Annotate(store.status(), "initializing from " + env.ToString());
    ctx.store = *store;
  }
  ProcessGroupOptions group = options.group;
  if (group.timeout == ProcessGroupOptions().timeout) group.timeout = options.timeout;
  if (group.gloo.hostname.empty() && group.gloo.iface.empty()) {
    // Ranks on other hosts must reach ours; a loopback master means every
    // rank runs on this host (e.g. several launchers simulating nodes).
    group.gloo.hostname =
        env.multi_node() && !IsLoopbackHost(env.master_addr) ? HostName() : "127.0.0.1";
  }
  if (group.nccl.device < 0) group.nccl.device = env.local_rank;
  auto world = CreateProcessGroup(options.backend, ctx.store, env.rank, env.world_size, group);
  if (!world.ok()) return Annotate(world.status(), "initializing from " + env.ToString());
  ctx.world = *world;
  return ctx;
}

absl::StatusOr<DistributedContext> InitDistributedFromEnv(InitOptions options) {
  WEFT_ASSIGN_OR_RETURN(DistributedEnv env, ReadDistributedEnv());
  return InitDistributed(env, std::move(options));
}

}  // namespace weft::comm
