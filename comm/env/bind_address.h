// The address this rank's gloo sockets bind to and advertise, so ranks on
// other hosts can reach it. In order:
//   1. --gloo_iface (the caller passes it), else GLOO_SOCKET_IFNAME (as
//      PyTorch users set it): that interface's IPv4 address; an interface
//      that does not exist or has no IPv4 address is an error listing the
//      interfaces there are.
//   2. Every rank on this host (one node, or a loopback MASTER_ADDR):
//      127.0.0.1.
//   3. Otherwise the local address of the interface that routes to
//      MASTER_ADDR, read from the socket layer (a connected UDP socket's
//      getsockname) rather than from the host name, which often resolves to
//      127.0.1.1 on Debian.
#ifndef WEFT_COMM_ENV_BIND_ADDRESS_H_
#define WEFT_COMM_ENV_BIND_ADDRESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/env/dist_env.h"

namespace weft::comm {

struct BindAddress {
  std::string address;  // an IPv4 address
  std::string reason;   // e.g. "interface veth0 (--gloo_iface)", "route to 10.0.0.1"
};

absl::StatusOr<BindAddress> ResolveBindAddress(const DistributedEnv& env,
                                               const std::string& iface_flag,
                                               const EnvLookup& lookup = ProcessEnv());

// The IPv4 address of a network interface.
absl::StatusOr<std::string> InterfaceAddress(const std::string& iface);
// The local address the kernel would use to reach `host`.
absl::StatusOr<std::string> LocalAddressToward(const std::string& host);
// Interfaces with an IPv4 address, "lo=127.0.0.1", for error messages.
std::vector<std::string> ListInterfaces();

}  // namespace weft::comm

#endif  // WEFT_COMM_ENV_BIND_ADDRESS_H_
