#include "comm/gloo/peer_directory.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include <gloo/transport/tcp/address.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace weft::comm::gloo_internal {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

// True when `pid` no longer runs: gone, or a zombie not yet reaped.
bool ProcessIsDead(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');  // the command name may contain spaces
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

absl::Status PeerDirectory::Publish(Store& store, int rank) {
  return store.Set(absl::StrCat("process/", rank), absl::StrCat(HostName(), " ", ::getpid()));
}

PeerDirectory PeerDirectory::Collect(Store& store, int rank, int size) {
  PeerDirectory d;
  d.rank_ = rank;
  d.processes_.resize(size);
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    absl::StatusOr<std::string> process = store.Get(absl::StrCat("process/", i), absl::Seconds(1));
    if (process.ok()) {
      std::pair<std::string, std::string> parts = absl::StrSplit(*process, ' ');
      int pid = 0;
      if (absl::SimpleAtoi(parts.second, &pid)) d.processes_[i] = {parts.first, pid};
    }
    // gloo's rendezvous stores, under key "<i>", one address per pair of
    // rank i (size - 1 of them, equal length).
    absl::StatusOr<std::string> all = store.Get(absl::StrCat(i), absl::Seconds(1));
    if (!all.ok() || all->empty() || all->size() % (size - 1) != 0) continue;
    const size_t chunk = all->size() / (size - 1);
    for (size_t off = 0; off + chunk <= all->size(); off += chunk) {
      try {
        std::vector<char> bytes(all->begin() + off, all->begin() + off + chunk);
        d.rank_by_address_[::gloo::transport::tcp::Address(bytes).str()] = i;
      } catch (const std::exception&) {
        break;  // a different layout: keep what we have
      }
    }
  }
  return d;
}

int PeerDirectory::FindPeer(const std::string& error) const {
  for (const auto& [address, r] : rank_by_address_) {
    if (absl::StrContains(error, address)) return r;
  }
  // Several died: do not guess which one this error met.
  const std::vector<int> exited = ExitedPeers();
  return exited.size() == 1 ? exited[0] : -1;
}

std::vector<int> PeerDirectory::ExitedPeers() const {
  const std::string host = HostName();
  std::vector<int> out;
  for (size_t r = 0; r < processes_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || processes_[r].host != host) continue;
    if (ProcessIsDead(processes_[r].pid)) out.push_back(static_cast<int>(r));
  }
  return out;
}

}  // namespace weft::comm::gloo_internal
