// The operator's face of an agent: what shoalctl asks for through the
// runtime's control handlers (invitations, quotas, submits, deletes,
// priorities, nominations, logs), the views they answer with, and what the
// handshake gate and the metrics read. The runtime reaches it through
// Agent::operations(); it never sees the parts behind it.
//
// Contract: call inside a batch (batch.h), between steps, never from inside
// one. A mutation's messages are sealed before it returns and leave with the
// batch's commit; its first store failure is its Status. Views return
// values, true when returned. Errors name the request's field
// (agent/control/commands.h), never a command-line flag.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/cluster/cluster.h"
#include "agent/core/views.h"
#include "common/status.h"
#include "model/quota.h"
#include "model/resources.h"
#include "model/workload.h"
#include "store/records.h"

namespace shoal::core {

class Operations {
 public:
  virtual ~Operations() = default;

  // ---- identity and invitations ----
  virtual std::string id_card() const = 0;
  virtual const std::string& self_id() const = 0;
  // Issues a token for the source `to_card`. One invitation per source: a
  // new one replaces (renews) the previous one without disturbing its work.
  virtual Result<std::string> create_invitation(std::string_view to_card,
                                                const InvitationOptions& options) = 0;
  Result<std::string> create_invitation(std::string_view to_card,
                                        const std::vector<std::string>& namespaces) {
    return create_invitation(to_card, InvitationOptions{namespaces, {}, {}, false, {}});
  }
  // Takes an issued invitation back at once and tells the source. With
  // `evict`, the source's work here is stopped and reported Failed (Revoked);
  // without, it runs to completion. Unapproved reservations go either way.
  virtual Status revoke_invitation(const std::string& id, bool evict) = 0;
  // Returns the inviting cluster's name.
  virtual Result<std::string> accept_invitation(std::string_view token) = 0;
  virtual std::vector<InvitationView> invitations() const = 0;
  // Whether the transport may complete a handshake with this key: it holds
  // a valid invitation in either direction, or work is still in flight
  // between us (so the last statuses of revoked or expired work get through).
  virtual bool admits_connection(const std::string& peer_id) const = 0;
  // `shoalctl peer forget` (`name`: a cluster name or a peer id), for a
  // cluster gone for good: every invitation with it, either way, is
  // revoked; its work here is stopped; our copies there count as lost and
  // are placed again once a lease renewed until now has certainly ended,
  // never sooner; DELETEs owed to it are let go then. From now on it is
  // not listed, nothing is sent to it and what it sends is dropped, across
  // restarts, until a new invitation either way.
  virtual Result<PeerForgotten> forget_peer(const std::string& name) = 0;
  // Every known peer's id, without building views (for the handshake check).
  virtual std::vector<std::string> peer_ids() const = 0;
  virtual std::vector<PeerView> peers() const = 0;

  // ---- federation-wide quotas of our namespaces (docs/scheduling.md) ----
  // Set replaces a namespace's, delete removes it (NotFound when none).
  virtual Status set_quota(const model::QuotaSpec& quota) = 0;
  virtual Status delete_quota(const std::string& namespace_name) = 0;
  virtual std::vector<QuotaView> quotas() const = 0;

  // ---- workloads submitted here ----
  // All or nothing: a duplicate name refuses the whole batch. Returns uids.
  virtual Result<std::vector<std::string>> submit(
      const std::vector<model::WorkloadSpec>& specs) = 0;
  // Stops the workload wherever it holds or runs anything, then forgets it
  // (its events stay). Until every copy is confirmed stopped the workload
  // shows reason "Deleting"; the name is free again afterwards.
  virtual Status delete_workload(const std::string& namespace_name, const std::string& name) = 0;
  // The same without waiting for the clusters to confirm (`shoalctl delete
  // workload --force`, for a cluster gone for good): the workload is
  // forgotten at once and its name is free. A copy at a cluster that is
  // only unreachable stops when our lease there lapses, or on the DELETE
  // that answers its next HOLDINGS (SourceRole::force_delete).
  virtual Status force_delete_workload(const std::string& namespace_name,
                                       const std::string& name) = 0;
  // `shoalctl patch workload --priority` (SourceRole::set_priority).
  virtual Status set_priority(const std::string& namespace_name, const std::string& name,
                              int32_t priority) = 0;
  // External dispatcher: place only on these clusters (by name). Replacing
  // the nominations cancels candidates at clusters no longer named; refused
  // once the workload is bound.
  virtual Status nominate(const std::string& namespace_name, const std::string& name,
                          const std::vector<std::string>& clusters) = 0;
  // Top-level workloads (the copies of a multi-cluster workload are not
  // listed); the same a page at a time (SourceBook::workloads_page).
  virtual std::vector<store::WorkloadRecord> workloads() const = 0;
  virtual WorkloadPage workloads_page(const std::string& namespace_name, const std::string& after,
                                      size_t limit) const = 0;
  // numberOfClusters > 1: the copies of group `uid`, by copy index.
  virtual std::vector<store::WorkloadRecord> copies_of(const std::string& uid) const = 0;
  virtual std::optional<store::WorkloadRecord> find_workload(const std::string& namespace_name,
                                                             const std::string& name) const = 0;
  // A workload or copy submitted here, by uid.
  virtual std::optional<store::WorkloadRecord> workload_by_uid(const std::string& uid) const = 0;
  // Counts by phase, cheap at any size (status, benchmarks).
  virtual WorkloadCounts workload_counts() const = 0;
  // Every cluster this agent may place a workload of `namespace_name` and
  // `queue` on, as its placement engine sees them now (get clusters).
  virtual std::vector<LiveCluster> live_inventory(const std::string& namespace_name,
                                                  const std::string& queue) const = 0;
  virtual Result<std::vector<store::EventRecord>> events(const std::string& subject) = 0;
  // Watching (SourceBook::watch_changes): what changed since the last take.
  virtual void watch_workloads(bool on) = 0;
  virtual std::vector<store::WorkloadRecord> take_workload_changes() = 0;

  // ---- output ----
  // Output of one replica of `record` (a workload or one of its copies) as
  // its cluster keeps it: read at once from this agent's own cluster, or
  // asked of the peer that runs it (LOG_REQUEST, sent once the batch
  // commits) — then `pending` names the request, whose answer arrives in a
  // later batch: take_peer_log(pending), or abandon_peer_log.
  struct LogRead {
    cluster::LogChunk chunk;
    uint64_t pending = 0;
  };
  virtual Result<LogRead> read_log(const store::WorkloadRecord& record, int replica, int64_t offset,
                                   size_t max_bytes) = 0;
  virtual std::optional<Result<cluster::LogChunk>> take_peer_log(uint64_t id) = 0;
  virtual void abandon_peer_log(uint64_t id) = 0;
  // The same for a copy this cluster runs for another source (the target
  // operator's view): the one hosted copy named namespace/name, or, once
  // its source has let it go, the newest that ran here (from the run rows).
  virtual Result<cluster::LogChunk> read_hosted_log(const std::string& namespace_name,
                                                    const std::string& name, int replica,
                                                    int64_t offset, size_t max_bytes) = 0;

  // ---- this cluster as a target ----
  // Operator action: stop a copy this cluster runs for a source
  // (`from_cluster` picks one when several sources use the name). The source
  // sees Failed with reason DeletedAtTarget and, under `restartPolicy:
  // OnFailure`, places it again.
  virtual Status stop_hosted(const std::string& namespace_name, const std::string& name,
                             const std::string& from_cluster) = 0;
  virtual std::vector<store::ReservationRecord> reservations() const = 0;
  // What weighted routing reads, the cluster's total, and the local queues'
  // depths by (namespace, queue).
  virtual std::map<std::string, model::UsageCounts> namespace_counts() const = 0;
  virtual model::UsageCounts cluster_counts() const = 0;
  virtual std::map<std::pair<std::string, std::string>, int64_t> queue_depths() const = 0;

  // ---- the agent itself ----
  virtual const AgentStats& stats() const = 0;
  virtual uint64_t boot() const = 0;
};

}  // namespace shoal::core
