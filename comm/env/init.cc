#include "comm/env/init.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "comm/process_group/registry.h"
#include "comm/store/hash_store.h"
#include "comm/store/tcp_store.h"
#include "comm/store/tcp_store_wire.h"
#include "comm/util/socket.h"
#include "core/base/errors.h"
#include "core/base/status_macros.h"

namespace weft::comm {
namespace {

// Two processes that resolve to the same rank (a launcher misconfigured,
// two jobs on one port) would otherwise wait for a peer that never comes;
// the second claim of a rank fails at once and names the first holder.
absl::Status ClaimRank(Store& store, const DistributedEnv& env) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string me = absl::StrCat(host, " pid ", getpid());
  const std::string key = absl::StrCat("weft/rank_claim/", env.rank);
  WEFT_ASSIGN_OR_RETURN(std::string holder, store.CompareSet(key, "", me));
  if (holder != me) {
    return FailedPrecondition(
        absl::StrCat("rank ", env.rank, " of ", env.world_size, " (", env.launcher,
                     ") is already taken by ", holder, "; this process is ", me),
        "one process per rank",
        "two processes resolved to the same rank: check the launcher's rank variables, or "
        "two jobs share MASTER_ADDR:MASTER_PORT (give each its own MASTER_PORT)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DistributedContext> InitDistributed(const DistributedEnv& env,
                                                   InitOptions options) {
  DistributedContext ctx;
  ctx.env = env;
  // Before the store: a wrong interface fails at once, not after a timeout.
  WEFT_ASSIGN_OR_RETURN(ctx.bind, ResolveBindAddress(env, options.gloo_iface));
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
    // The job's secret, when its launcher (or the user) set one.
    if (const char* token = std::getenv(wire::kTokenEnv); token != nullptr) {
      store_options.token = token;
    }
    auto store = TcpStore::Create(store_options);
    if (!store.ok()) return Annotate(store.status(), "initializing from " + env.ToString());
    ctx.store = *store;
    WEFT_RETURN_IF_ERROR(ClaimRank(*ctx.store, env));
    // A launcher's store outlives its workers; when it is gone, so is the
    // launcher (WEFT_STORE_WATCHDOG_S: seconds between checks, 0: none).
    double every_s = 5;
    if (const char* s = std::getenv("WEFT_STORE_WATCHDOG_S"); s != nullptr) every_s = std::atof(s);
    if (env.launcher_hosts_store && every_s > 0) {
      TcpStoreOptions watch = store_options;
      watch.connect_timeout = absl::Seconds(2);
      watch.timeout = absl::Seconds(std::max(2.0, every_s));
      auto dog = StoreWatchdog::Start({.store = watch, .interval = absl::Seconds(every_s)});
      if (!dog.ok()) return Annotate(dog.status(), "starting the store watchdog");
      ctx.watchdog = *std::move(dog);
    }
  }
  ProcessGroupOptions group = options.group;
  if (group.timeout == ProcessGroupOptions().timeout) group.timeout = options.timeout;
  if (group.gloo.hostname.empty() && group.gloo.iface.empty()) {
    group.gloo.hostname = ctx.bind.address;
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
