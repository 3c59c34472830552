// The control API shoalctl speaks: one JSON request, one JSON response, over
// the agent's ipc:// control socket. See protocol/README.md ("Control API").
#pragma once

#include <chrono>

#include <nlohmann/json.hpp>

#include "agent/core/agent.h"

namespace shoal::runtime {

struct ControlContext {
  core::Agent& agent;
  const cluster::Cluster& cluster;
  uint64_t transport_drops;
  uint64_t handshakes_refused = 0;  // CURVE handshakes the ZAP handler turned away
  uint64_t rate_limited = 0;        // peer messages dropped unread over peerMessageRate
  std::string storage_fault;        // why the state database cannot be written; "" when it can
  store::CommitStats commits;       // what the batches cost the disk so far
  size_t watches = 0;               // shoalctl get -w clients being told of changes
};

// Never throws. A response is {"ok": true, ...} or
// {"ok": false, "code": "<ErrorCode name>", "error": "<one line>"}.
nlohmann::json handle_control(const ControlContext& context, const nlohmann::json& request);

nlohmann::json workload_to_json(const store::WorkloadRecord& record);

// A "logs" request for a copy at a peer cannot be answered in its batch:
// handle_control replies {"ok": true, kPendingPeerLog: id}, and the loop
// holds the client's request until take_peer_log(id) has the answer (then
// log_reply) or kPeerLogTimeout has passed.
inline constexpr const char* kPendingPeerLog = "pendingPeerLog";
inline constexpr std::chrono::seconds kPeerLogTimeout{5};
nlohmann::json log_reply(const Result<cluster::LogChunk>& chunk);

// "backup {path}" is answered {"ok": true, kPendingBackup: path}: the loop
// copies the database once no batch is open (SqliteStore::backup_to).
inline constexpr const char* kPendingBackup = "pendingBackup";

// "watch-workloads {namespace?}" (shoalctl get workloads -w) is answered
// {"ok": true, kStartWatch: namespace ("" for all)}: the loop then keeps the
// client and, after every batch that changed its workloads, sends it
// {"ok": true, "items": [workload, ...]} (and an empty one every
// kWatchKeepalive, by which it notices a client gone); {"ok": false, ...}
// ends the watch (the agent stops).
inline constexpr const char* kStartWatch = "startWatch";
inline constexpr std::chrono::seconds kWatchKeepalive{10};
inline constexpr size_t kMaxWatchers = 64;

}  // namespace shoal::runtime
