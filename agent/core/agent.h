// The agent: one state machine that plays both roles of the placement
// protocol. As a source it places the workloads submitted to
// it; as a target it reserves and runs what invited sources ask for, its own
// cluster included. It never touches a socket, a file, a thread or the wall
// clock: every input is a call (a wire message, a tick, a control request),
// every output goes through Transport, Store or Cluster.
//
// Agent is the router (agent/core/README.md): it checks each message (trust,
// replay, permission), hands it to the part that owns it — PeerTable,
// InvitationBook, SourceRole, TargetRole — and owns the step's effects.
//
// Contract with the runtime, per batch of steps (run_batch in batch.h is
// the one implementation): Store::begin; the steps; finish_batch() (and
// store_health()); commit; then release what Transport was handed and call
// batch_committed(). Sleep until next_deadline().
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/cluster/cluster.h"
#include "agent/core/config.h"
#include "agent/core/context.h"
#include "agent/core/interfaces.h"
#include "agent/core/invitation_book.h"
#include "agent/core/peer_table.h"
#include "agent/core/remote_logs.h"
#include "agent/core/source/role.h"
#include "agent/core/target/role.h"
#include "agent/core/views.h"
#include "crypto/id_card.h"
#include "crypto/identity.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"
#include "store/store.h"

namespace spdlog {
class logger;
}

namespace shoal::core {

class Agent {
 public:
  // `signatures`: Ed25519 for every agent; the simulator passes its own.
  Agent(AgentConfig config, crypto::Identity identity, const Clock& clock, Transport& transport,
        store::Store& store, cluster::Cluster& cluster, Rng& rng,
        std::shared_ptr<spdlog::logger> logger = nullptr,
        const crypto::SignatureScheme& signatures = crypto::ed25519_signatures());
  ~Agent();

  // Loads persisted state, bumps the boot counter, restores reservations on
  // the cluster and greets peers. Call once, inside a batch.
  Status start();

  // Only the loading half of start(): memory and cluster as the store holds
  // them, nothing sent. For a read-only agent while the store cannot be
  // written (the runtime then answers reads from it and nothing else); any
  // write it attempts belongs in a batch the caller rolls back. Call once,
  // instead of start().
  Status load();

  // Inputs. Returns how many messages the envelope carried that were
  // handled (a BATCH carries several; a dropped envelope none).
  size_t handle_wire(std::span<const uint8_t> wire);
  void tick();

  // Control requests (from shoalctl through the runtime).
  std::string id_card() const;
  // Issues a token for the source `to_card`. One invitation per source: a
  // new one replaces (renews) the previous one without disturbing its work.
  Result<std::string> create_invitation(std::string_view to_card, const InvitationOptions& options);
  Result<std::string> create_invitation(std::string_view to_card,
                                        const std::vector<std::string>& namespaces) {
    return create_invitation(to_card, InvitationOptions{namespaces, {}, {}, false, {}});
  }
  // Takes an issued invitation back at once and tells the source. With
  // `evict`, the source's work here is stopped and reported Failed (Revoked);
  // without, it runs to completion. Unapproved reservations go either way.
  Status revoke_invitation(const std::string& id, bool evict);
  std::vector<InvitationView> invitations() const;
  // Federation-wide quotas of our namespaces (docs/scheduling.md): set
  // replaces a namespace's, delete removes it (NotFound when none).
  Status set_quota(const model::QuotaSpec& quota);
  Status delete_quota(const std::string& namespace_name);
  std::vector<QuotaView> quotas() const;
  // Whether the transport may complete a handshake with this key: it holds
  // a valid invitation in either direction, or work is still in flight
  // between us (so the last statuses of revoked or expired work get through).
  bool admits_connection(const std::string& peer_id) const;
  // Returns the inviting cluster's name.
  Result<std::string> accept_invitation(std::string_view token);
  // All or nothing: a duplicate name refuses the whole batch. Returns uids.
  Result<std::vector<std::string>> submit(const std::vector<model::WorkloadSpec>& specs);

  // Stops the workload wherever it holds or runs anything, then forgets it
  // (its events stay). Until every copy is confirmed stopped the workload
  // shows reason "Deleting"; the name is free again afterwards.
  Status delete_workload(const std::string& namespace_name, const std::string& name);
  // `shoalctl patch workload --priority`: see SourceRole::set_priority.
  Status set_priority(const std::string& namespace_name, const std::string& name, int32_t priority);
  // Operator action at the target: stop a copy this cluster runs for a
  // source (`from_cluster` picks one when several sources use the name). The
  // source sees Failed with reason DeletedAtTarget and, under
  // `restartPolicy: OnFailure`, places it again.
  Status stop_hosted(const std::string& namespace_name, const std::string& name,
                     const std::string& from_cluster);
  // External dispatcher: place only on these clusters (by name). Replacing
  // the nominations cancels candidates at clusters no longer named; refused
  // once the workload is bound.
  Status nominate(const std::string& namespace_name, const std::string& name,
                  const std::vector<std::string>& clusters);

  // Top-level workloads (the copies of a multi-cluster workload are not listed).
  std::vector<store::WorkloadRecord> workloads() const;
  // The same, a page at a time (SourceBook::workloads_page).
  WorkloadPage workloads_page(const std::string& namespace_name, const std::string& after,
                              size_t limit) const {
    return source_.book().workloads_page(namespace_name, after, limit);
  }
  // numberOfClusters > 1: the copies of group `uid`, by copy index.
  std::vector<store::WorkloadRecord> copies_of(const std::string& uid) const;
  // Watching (SourceBook::watch_changes): what changed since the last take.
  void watch_workloads(bool on) { source_.book().watch_changes(on); }
  std::vector<store::WorkloadRecord> take_workload_changes() { return source_.book().take_changes(); }
  // Counts by phase, cheap at any size (status, benchmarks).
  WorkloadCounts workload_counts() const { return source_.workload_counts(); }
  // Every cluster this agent may place a workload of `namespace_name` and
  // `queue` on, as its placement engine sees them now (get clusters).
  std::vector<LiveCluster> live_inventory(const std::string& namespace_name,
                                          const std::string& queue) const {
    return source_.live_inventory(namespace_name, queue);
  }
  std::optional<store::WorkloadRecord> find_workload(const std::string& namespace_name,
                                                     const std::string& name) const;
  // A workload or copy submitted here, by uid, as it stands now (null when
  // none); valid until the agent next changes.
  const store::WorkloadRecord* workload_by_uid(const std::string& uid) const;
  Result<std::vector<store::EventRecord>> events(const std::string& subject);
  // Output of one replica of `record` (a workload or one of its copies) as
  // its cluster keeps it: read at once from this agent's own cluster, or
  // asked of the peer that runs it (LOG_REQUEST, sent once the batch
  // commits) — then `pending` names the request, whose answer arrives in a
  // later batch: take_peer_log(pending), or abandon_peer_log.
  struct LogRead {
    cluster::LogChunk chunk;
    uint64_t pending = 0;
  };
  Result<LogRead> read_log(const store::WorkloadRecord& record, int replica, int64_t offset,
                           size_t max_bytes);
  std::optional<Result<cluster::LogChunk>> take_peer_log(uint64_t id) {
    return remote_logs_.take(id);
  }
  void abandon_peer_log(uint64_t id) { remote_logs_.abandon(id); }
  // The same for a copy this cluster runs for another source (the target
  // operator's view): the one hosted copy named namespace/name, or, once
  // its source has let it go, the newest that ran here (from the run rows).
  Result<cluster::LogChunk> read_hosted_log(const std::string& namespace_name,
                                            const std::string& name, int replica, int64_t offset,
                                            size_t max_bytes);
  std::vector<store::ReservationRecord> reservations() const;
  std::vector<PeerView> peers() const;
  // Every known peer's id, without building views (for the handshake check).
  std::vector<std::string> peer_ids() const;
  const AgentStats& stats() const { return context_.stats(); }
  // As a target: what weighted routing reads, and the local queue's depth.
  const std::map<std::string, model::UsageCounts>& namespace_counts() const {
    return target_.counts().by_namespace();
  }
  const model::UsageCounts& cluster_counts() const { return target_.counts().cluster(); }
  std::map<std::pair<std::string, std::string>, int64_t> queue_depths() const {
    return target_.counts().queue_depths();
  }
  const std::string& self_id() const { return context_.self_id(); }

  // Call before committing a batch: writes what the batch accumulated (peer
  // rows, replay marks). Returns store_health().
  Status finish_batch();
  // Copies bound since the last batch_committed(), waiting for a commit to
  // be launched (a batch with none, and no envelope sealed, is quiet:
  // GroupCommit in batch.h).
  bool has_launches() const { return target_.has_launches(); }
  TimePoint now() const { return context_.now(); }
  // How long what nobody waits on may wait to share an envelope
  // (Context::send_later).
  Duration lazy_delay() const { return context_.lazy_delay(); }
  // How long a quiet batch's commit may wait for the next batch's
  // (GroupCommit): half a heartbeat, when the next heartbeat pass sends and
  // so commits the group, or the lazy delay if that is longer (0 with it:
  // every batch commits). A quiet batch that deferred a message commits
  // sooner, with the batch that sends it (within the lazy delay); only one
  // that sends nothing at all waits longer — a HELLO or CAPACITY read, its
  // sender's sequence number kept — so an idle agent fsyncs about once per
  // heartbeat pass rather than four times a second.
  Duration commit_linger() const {
    Duration lazy = lazy_delay();
    return lazy.count() == 0 ? lazy : std::max(lazy, context_.config().heartbeat_interval / 2);
  }
  // Call after the batch committed: applies its effects on the cluster
  // (launches of copies bound in it). Also after load(), whose state is
  // committed.
  void batch_committed();
  // When tick() next has something to do; the runtime may sleep until then
  // unless a message or request arrives. At most a heartbeat away.
  TimePoint next_deadline();

  // Cross-checks every part's invariants (the simulations call it after
  // every step): "" while all hold, else the part and the first broken one.
  std::string broken_invariant();
  bool check_invariants() { return broken_invariant().empty(); }

  // The first failed store write since start, if any: the runtime must not
  // commit or send after one (it rolls back and rebuilds the agent from the
  // store, read-only while writes keep failing).
  const Status& store_health() const { return context_.store_health(); }
  uint64_t boot() const { return context_.boot(); }

 private:
  // An accepted envelope's sender: its row and its invitations on record,
  // found once for every check and mark of the envelope's messages.
  struct Sender {
    PeerTable::Row row;
    InvitationBook::OnRecord invitations;
  };
  // A known peer's invitations on record, from its row's copy while the
  // book has made no new index entry since (else looked up and kept).
  const InvitationBook::OnRecord& invitations_of(TextMap<PeerTable::Peer>::value_type& row);
  // One message of an accepted envelope: type, body and permission checks,
  // then dispatch. False if it was dropped.
  bool handle_message(const std::string& from, const Sender& sender, uint8_t type,
                      std::span<const uint8_t> bytes);
  // `sender` is null for our own messages.
  void dispatch(const std::string& from, const protocol::Body& body, const Sender* sender);
  void drain_local();
  void drop(protocol::DropReason reason, const std::string& peer, const std::string& detail);
  void on_hello(const std::string& from, const Sender& sender, const protocol::Hello& hello);
  void on_revoke(const std::string& from, const protocol::Revoke& message);
  // HELLO to every peer we sent nothing since `silent_since` (a source or
  // a target of ours).
  void send_heartbeats(TimePoint silent_since);
  void remember_peer(const crypto::IdCard& card);
  // The end of a control mutation: self-addressed messages handled, peer
  // rows written; the first store failure, if any.
  Status end_control();
  bool is_source(const std::string& peer_id) const {
    return invitations_.is_source(peer_id, context_.now());
  }
  bool is_target(const std::string& peer_id) const {
    return invitations_.is_target(peer_id, context_.now());
  }

  PeerTable peers_;
  Context context_;
  InvitationBook invitations_;
  target::TargetRole target_;
  source::SourceRole source_;
  RemoteLogs remote_logs_;
  TimePoint last_heartbeat_{};
  TimePoint last_tick_{};
  std::map<std::string, TimePoint> last_drop_log_;
};

}  // namespace shoal::core
