// PeerDirectory: names the peer rank behind a gloo transport error.
//
// gloo reports a failed connection by socket address ("Connection closed by
// peer [127.0.0.1]:41234"). Two best-effort clues map that back to a rank:
//   - the listening addresses each rank published for gloo's rendezvous
//     (matches when the error names the peer's listening socket), and
//   - the host and pid each rank publishes here: a peer on this host whose
//     process is gone (or a zombie) is the one that died.
// Neither clue is guaranteed; errors then simply carry no peer rank.
#ifndef WEFT_COMM_GLOO_PEER_DIRECTORY_H_
#define WEFT_COMM_GLOO_PEER_DIRECTORY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/store/store.h"

namespace weft::comm::gloo_internal {

class PeerDirectory {
 public:
  // Before gloo's rendezvous: records this process's host and pid.
  static absl::Status Publish(Store& store, int rank);
  // After the rendezvous (every rank has published by then).
  static PeerDirectory Collect(Store& store, int rank, int size);

  // The peer rank `error` (a gloo message) points at, or -1.
  int FindPeer(const std::string& error) const;
  // Ranks on this host whose processes have exited (a launcher killed with
  // its workers takes several at once; FindPeer names only a lone one).
  std::vector<int> ExitedPeers() const;

 private:
  struct Process {
    std::string host;
    int pid = 0;
  };
  std::map<std::string, int> rank_by_address_;
  std::vector<Process> processes_;  // by rank; empty host when unknown
  int rank_ = 0;
};

}  // namespace weft::comm::gloo_internal

#endif  // WEFT_COMM_GLOO_PEER_DIRECTORY_H_
