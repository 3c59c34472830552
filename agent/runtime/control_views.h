// The replies of the control API (agent/control/commands.h) as JSON: the
// views of peers, invitations, workloads, reservations and the agent's
// status that shoalctl prints (-o json prints them as they are). The
// field names are the API: protocol/README.md lists them, and a rename is
// a breaking change for every script that reads them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "agent/core/operations.h"
#include "store/store.h"

namespace shoal::runtime {

// What a reply may read beside the agent: the loop's own counters.
struct ControlContext {
  core::Operations& agent;
  const cluster::Cluster& cluster;
  uint64_t transport_drops;
  uint64_t handshakes_refused = 0;  // CURVE handshakes the ZAP handler turned away
  uint64_t rate_limited = 0;        // peer messages dropped unread over peerMessageRate
  std::string storage_fault;        // why the state database cannot be written; "" when it can
  store::CommitStats commits;       // what the batches cost the disk so far
  size_t watches = 0;               // shoalctl get -w clients being told of changes
};

// {"ok": false, "code": <ErrorCode name>, "error": <message>}.
nlohmann::json error_response(const Status& status);

nlohmann::json peers_json(const core::Operations& agent);
// A peer by cluster name or id, with its invitations and events.
Result<nlohmann::json> describe_peer_json(core::Operations& agent, const std::string& name);
nlohmann::json invitations_json(const core::Operations& agent);
// The federation-wide quotas: limits, what each namespace holds, who waits.
nlohmann::json quotas_json(const core::Operations& agent);
// What `peer forget` did (protocol/README.md, "Control API").
nlohmann::json peer_forgotten_json(const core::PeerForgotten& forgotten);
nlohmann::json reservations_json(const core::Operations& agent);
nlohmann::json status_json(const ControlContext& context);

nlohmann::json workload_to_json(const store::WorkloadRecord& record);
// A workload with its copies' status and its events.
Result<nlohmann::json> describe_workload_json(core::Operations& agent,
                                              const std::string& namespace_name,
                                              const std::string& name);
nlohmann::json log_reply(const Result<cluster::LogChunk>& chunk);

}  // namespace shoal::runtime
