// Output of copies that run at peers, read over the peer link (LOG_REQUEST /
// LOG_CHUNK). The source side only: which requests are in flight to whom,
// and their answers until the caller takes them. Nothing is stored; a
// request whose answer never comes is the caller's to abandon (the runtime
// gives up after kPeerLogTimeout and tells the user).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "agent/cluster/cluster.h"
#include "common/status.h"
#include "protocol/messages.h"

namespace shoal::core {

class RemoteLogs {
 public:
  // Requests in flight at once, over all peers: shoalctl waits on each, so
  // more would only be clients piling up on an unreachable peer.
  static constexpr size_t kMaxInFlight = 64;

  // Registers a request to `peer_id`; the caller sends `request` (its id
  // filled in here). Unavailable when kMaxInFlight are in flight.
  Result<uint64_t> start(const std::string& peer_id, protocol::LogRequest& request);
  // An answer from `from`: kept if it answers a request in flight to `from`,
  // else ignored (late, duplicated, or from someone else).
  void on_chunk(const std::string& from, const protocol::LogChunk& chunk);
  // The answer to `id` once it has arrived (and the request is then done);
  // nullopt while it has not.
  std::optional<Result<cluster::LogChunk>> take(uint64_t id);
  // Gives up on `id`: a later answer is ignored.
  void abandon(uint64_t id) { in_flight_.erase(id); }

 private:
  struct InFlight {
    std::string peer_id;
    std::optional<Result<cluster::LogChunk>> answer;
  };
  uint64_t next_id_ = 1;
  std::map<uint64_t, InFlight> in_flight_;
};

}  // namespace shoal::core
