#include "comm/env/bind_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "core/base/errors.h"

namespace weft::comm {
namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || absl::StartsWith(host, "127.") || host == "::1";
}

std::string Ipv4(const sockaddr* sa) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  return buf;
}

}  // namespace

std::vector<std::string> ListInterfaces() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    out.push_back(absl::StrCat(a->ifa_name, "=", Ipv4(a->ifa_addr)));
  }
  freeifaddrs(list);
  return out;
}

absl::StatusOr<std::string> InterfaceAddress(const std::string& iface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return Unavailable(absl::StrCat("listing network interfaces: ", std::strerror(errno)),
                       "getifaddrs to work");
  }
  std::string found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if (iface == a->ifa_name) {
      found = Ipv4(a->ifa_addr);
      break;
    }
  }
  freeifaddrs(list);
  if (found.empty()) {
    return InvalidArgument(absl::StrCat("network interface '", iface, "'"),
                           absl::StrCat("an interface with an IPv4 address on this host: ",
                                        absl::StrJoin(ListInterfaces(), ", ")),
                           "set --gloo_iface / GLOO_SOCKET_IFNAME to one of them, or unset it "
                           "to use the interface that routes to MASTER_ADDR");
  }
  return found;
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "9", &hints, &res); rc != 0 || res == nullptr) {
    return InvalidArgument(absl::StrCat("MASTER_ADDR=", host, ": ", gai_strerror(rc)),
                           "a host name or IPv4 address this host can resolve",
                           "set --gloo_iface (or GLOO_SOCKET_IFNAME) to choose the interface");
  }
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  absl::Status status;
  std::string address;
  // A UDP connect sends nothing: it only asks the kernel for the route.
  if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    status = Unavailable(absl::StrCat("no route from this host to MASTER_ADDR=", host, ": ",
                                      std::strerror(errno)),
                         "a network path to the master", "check the interfaces: " +
                                                             absl::StrJoin(ListInterfaces(), ", "));
  } else {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      status = Unavailable(absl::StrCat("getsockname: ", std::strerror(errno)), "a local address");
    } else {
      address = Ipv4(reinterpret_cast<sockaddr*>(&local));
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  if (!status.ok()) return status;
  return address;
}

absl::StatusOr<BindAddress> ResolveBindAddress(const DistributedEnv& env,
                                               const std::string& iface_flag,
                                               const EnvLookup& lookup) {
  std::string iface = iface_flag, source = "--gloo_iface";
  if (iface.empty()) {
    if (std::optional<std::string> v = lookup("GLOO_SOCKET_IFNAME"); v && !v->empty()) {
      // PyTorch accepts a comma-separated list; the first one carries the group.
      iface = v->substr(0, v->find(','));
      source = "GLOO_SOCKET_IFNAME";
    }
  }
  if (!iface.empty()) {
    absl::StatusOr<std::string> a = InterfaceAddress(iface);
    if (!a.ok()) return Annotate(a.status(), "from " + source);
    return BindAddress{*a, absl::StrCat("interface ", iface, " (", source, ")")};
  }
  if (!env.multi_node() || IsLoopback(env.master_addr)) {
    return BindAddress{"127.0.0.1", "all ranks on this host"};
  }
  absl::StatusOr<std::string> a = LocalAddressToward(env.master_addr);
  if (!a.ok()) return a.status();
  if (IsLoopback(*a)) {
    return FailedPrecondition(
        absl::StrCat("the route to MASTER_ADDR=", env.master_addr, " leaves through loopback (",
                     *a, ") in a job across ", env.world_size / env.local_world_size, " nodes"),
        "MASTER_ADDR an address of the master node that the other nodes can reach",
        "set MASTER_ADDR to the master's network address (not its loopback name), or "
        "choose the interface with --gloo_iface / GLOO_SOCKET_IFNAME");
  }
  return BindAddress{*a, "route to MASTER_ADDR " + env.master_addr};
}

}  // namespace weft::comm
