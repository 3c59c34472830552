// The agent: one state machine that plays both roles of the placement
// protocol (DESIGN.md §5). As a source it places the workloads submitted to
// it; as a target it reserves and runs what invited sources ask for, its own
// cluster included. It never touches a socket, a file, a thread or the wall
// clock: every input is a call (a wire message, a tick, a control request),
// every output goes through Transport, Store or Cluster.
//
// Contract with the runtime: call each input inside an open store batch;
// commit the batch, then deliver what Transport was handed during it.
#pragma once

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "agent/cluster/cluster.h"
#include "agent/core/interfaces.h"
#include "agent/placement/engine.h"
#include "crypto/id_card.h"
#include "crypto/identity.h"
#include "crypto/invitation.h"
#include "protocol/envelope.h"
#include "protocol/messages.h"
#include "store/store.h"

namespace spdlog {
class logger;
}

namespace shoal::core {

using namespace std::chrono_literals;

struct AgentConfig {
  std::string cluster;
  std::string org;
  std::string endpoint;
  Duration reservation_ttl = 30s;     // an unapproved reservation is released after this
  Duration heartbeat_interval = 2s;   // HELLO and CAPACITY to every peer
  Duration retry_interval = 1s;       // unanswered protocol messages are re-sent this often
  Duration pending_retry = 5s;        // first retry of a workload nobody can take now ...
  Duration pending_retry_max = 60s;   // ... doubling per attempt up to this
  Duration queue_hold = 2min;         // a candidate waits in a target's queue this long after
                                      // its last CANDIDATE (must exceed pending_retry_max)
  Duration replay_window = 5min;      // messages sent longer ago (or ahead) than this are dropped
  Duration invitation_lifetime = 720h;
  model::Dispatcher default_dispatcher = model::Dispatcher::kAllAtOnce;  // spec.placement.dispatcher unset
  // Lease fencing (docs/lifecycle.md): a target runs our work only while we
  // renew its lease, every lease/4. 0 turns fencing off (MultiKueue's model).
  Duration lease = 2min;
  Duration max_clock_skew = 30s;        // between any two agents; part of the fencing arithmetic
  Duration worker_lost_timeout = 15min; // a silent winner's work is re-placed after this
                                        // (see check_fencing_timers)
  Duration gc_interval = 1min;          // reconciliation digests at least this often
};

// The contract between lease, skew, heartbeats and the worker-lost timeout
// that makes fencing sound: "" when it holds, else what to change.
std::string check_fencing_timers(const AgentConfig& config);

// What `invite create` asks for; unset fields take the agent's defaults.
struct InvitationOptions {
  std::vector<std::string> namespaces;
  crypto::InvitationLimits limits;
  std::optional<Duration> lifetime;  // default: AgentConfig::invitation_lifetime
  bool never_expires = false;        // explicit `--expires never`
  std::optional<TimePoint> not_before;
};

// Where an invitation stands now. The names are also REJECT reason codes.
enum class InvitationState { kActive, kNotYetValid, kExpired, kRevoked, kReplaced };
inline constexpr std::string_view kInvitationStateNames[] = {"Active", "NotYetValid", "Expired",
                                                             "Revoked", "Replaced"};
inline std::string invitation_state_name(InvitationState state) {
  return std::string(kInvitationStateNames[static_cast<int>(state)]);
}

// Resources held under an invitation: reserved or bound, not finished.
struct InvitationUsage {
  model::Resources resources;
  int64_t workloads = 0;
};

struct InvitationView {
  std::string id;
  std::string direction;  // "issued" (we are the target) or "accepted" (we are the source)
  std::string peer;       // the other cluster's name
  std::string peer_id;
  std::vector<std::string> namespaces;
  std::string state;  // Active, NotYetValid, Expired, Revoked, Replaced
  crypto::InvitationLimits limits;
  InvitationUsage usage;
  TimePoint not_before{};
  std::optional<TimePoint> expires;
};

struct PeerView {
  std::string id;
  std::string cluster;
  std::string org;
  std::string endpoint;
  std::string state;   // Connecting, Active, Unreachable, Expired, Revoked
  std::string reason;  // why the state is what it is, for humans
  std::optional<TimePoint> last_seen;
  // As their target: until when their lease lets us run their work (none:
  // they do not fence).
  std::optional<TimePoint> lease_until;
  std::vector<std::string> namespaces_offered;   // we invited them into these
  std::vector<std::string> namespaces_accepted;  // they invited us into these
  std::vector<protocol::NamespaceCapacity> capacity;  // what they advertise to us
  int workloads_placed = 0;                           // our workloads bound there now
};

struct AgentStats {
  std::array<uint64_t, protocol::kDropReasonCount> dropped{};
  uint64_t received = 0;
  uint64_t sent = 0;
  // By message type (index: protocol::MessageType): where the traffic goes.
  std::array<uint64_t, protocol::kMaxMessageType + 1> received_by_type{};
  std::array<uint64_t, protocol::kMaxMessageType + 1> sent_by_type{};
  std::map<std::string, uint64_t> rejected;  // CANDIDATEs this target refused, by reason code
};

class Agent {
 public:
  Agent(AgentConfig config, crypto::Identity identity, const Clock& clock, Transport& transport,
        store::Store& store, cluster::Cluster& cluster, Rng& rng,
        std::shared_ptr<spdlog::logger> logger = nullptr);
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

  // Inputs.
  void handle_wire(std::span<const uint8_t> wire);
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
  // numberOfClusters > 1: the copies of group `uid`, by copy index.
  std::vector<store::WorkloadRecord> copies_of(const std::string& uid) const;
  std::optional<store::WorkloadRecord> find_workload(const std::string& namespace_name,
                                                     const std::string& name) const;
  Result<std::vector<store::EventRecord>> events(const std::string& subject);
  std::vector<store::ReservationRecord> reservations() const;
  std::vector<PeerView> peers() const;
  // Every known peer's id, without building views (for the handshake check).
  std::vector<std::string> peer_ids() const;
  const AgentStats& stats() const { return stats_; }
  const std::string& self_id() const { return self_id_; }

  // Cross-checks in-memory state against the cluster; for tests.
  bool check_invariants() const;

 private:
  struct Peer {
    std::string cluster, org, endpoint;
    uint64_t last_boot = 0;
    uint64_t last_seq = 0;  // persisted with last_boot: replays stay replays across restarts
    std::optional<TimePoint> last_seen;
    uint64_t greeted_boot = 0;  // the peer boot whose HELLO we answered: one answer per boot
    std::map<std::string, protocol::NamespaceCapacity> capacity;
    std::optional<TimePoint> last_capacity_sent;
    std::vector<protocol::NamespaceCapacity> last_capacity;
    // As a source of this peer: when our last DIGEST (lease renewal) left.
    TimePoint last_digest_sent{};
    // As a target of this peer: the lease it asked for, and when it ends.
    int64_t lease_ms = 0;
    int64_t lease_until_ms = 0;
  };
  struct OwnedInvitation {
    crypto::Invitation invitation;
    store::InvitationRecord record;
  };
  enum class CandidateState { kSent, kReady, kRejected };
  struct CandidateProgress {
    CandidateState state = CandidateState::kSent;
    protocol::RejectCode code = protocol::RejectCode::kOther;  // when kRejected
    std::string reason;                                        // for people
    TimePoint last_sent{};
    double score = 0;  // from READY
    int resends = 0;   // CANDIDATE re-sent this often so far (resend_after)
  };
  struct PendingCancel {
    uint64_t epoch = 0;
    TimePoint last_sent{};
    TimePoint give_up_at{};
    int resends = 0;
  };
  struct PendingDelete {
    uint64_t epoch = 0;
    TimePoint last_sent{};
    std::optional<TimePoint> give_up_at;  // none for a copy that may still run
  };
  struct SourceWorkload {
    store::WorkloadRecord record;
    int pending_attempts = 0;  // rounds in a row that ended Pending: the backoff exponent
    std::string unasked;       // " cluster=Reason" for each target this round left out
    std::map<std::string, CandidateProgress> candidates;  // by target peer id, this epoch
    std::map<std::string, PendingCancel> cancels;         // by target peer id
    std::map<std::string, PendingDelete> deletes;         // by target peer id, while deleting
    TimePoint round_started{};
    TimePoint wave_started{};  // Incremental: when the last batch of candidates went out
    std::vector<std::pair<std::string, std::string>> untried;  // Incremental: ranked, not asked yet
    TimePoint last_approve_sent{};
    int approve_resends = 0;
    TimePoint next_round_at{};
    // (target, epoch) of each copy given up as lost without an outcome. If
    // one's outcome arrives while no other copy runs, it is kept (in memory
    // only; after a restart a late outcome is ignored and the work re-placed).
    std::set<std::pair<std::string, uint64_t>> lost_copies;
  };
  struct TargetReservation {
    store::ReservationRecord record;
    TimePoint last_status_sent{};
    uint64_t generation_sent = 0;  // of the last STATUS sent
    int status_resends = 0;        // of that generation (resend_after)
  };
  using ReservationKey = std::pair<std::string, std::string>;  // (source id, uid)
  // A candidate that fits this cluster but not its free room now. It waits
  // in memory (a restart forgets it; the source's retry re-queues it) and is
  // reserved, in fair-share order, when room frees.
  struct QueuedCandidate {
    uint64_t epoch = 0;
    model::WorkloadSpec spec;
    uint64_t arrival = 0;  // first arrival: the scheduler's "oldest first"
    TimePoint hold_until{};
  };

  // agent.cc: wire, trust, peers, plumbing.
  void dispatch(const std::string& from, const protocol::Body& body);
  void drain_local();
  void send(const std::string& peer_id, protocol::Body body);
  void drop(protocol::DropReason reason, const std::string& peer, const std::string& detail);
  bool may_send_as_source(const std::string& peer_id) const;  // we invited them
  bool may_send_as_target(const std::string& peer_id) const;  // they invited us
  std::vector<const crypto::Invitation*> valid_issued(const std::string& peer_id) const;
  std::vector<const crypto::Invitation*> valid_accepted(const std::string& peer_id) const;
  // Any invitation on record, valid or not: enough to hear about work
  // already in flight (CANCEL, STATUS, ...), never to start new work.
  bool ever_issued_to(const std::string& peer_id) const;
  // Invitations we issued to `peer_id` and revoked that it could still
  // present (not expired): it must hear of them.
  std::vector<std::string> revocations_to_tell(const std::string& peer_id) const;
  bool ever_accepted_from(const std::string& peer_id) const;
  static InvitationState invitation_state(const OwnedInvitation& owned, TimePoint now);
  InvitationUsage usage_of_source(const std::string& source) const;
  InvitationUsage usage_at_target(const std::string& target) const;
  // Why a target refuses a candidate: the code the source decides by, and
  // the text people read. None (false) when it does not.
  struct Refusal {
    protocol::RejectCode code = protocol::RejectCode::kOther;
    std::string reason;
    explicit operator bool() const { return !reason.empty(); }
  };
  // None when `spec` fits the limits of `from`'s invitation on top of what
  // it holds here; else QuotaExceeded:<resource>.
  Refusal limit_refusal(const std::string& from, const model::WorkloadSpec& spec) const;
  // Keeps the first failed store write in store_health_ (see store_health()).
  void note_store(const Status& status);
  void persist_peer(const std::string& id);
  void remember_peer(const crypto::IdCard& card);
  void record_event(const std::string& subject, const std::string& text);
  void persist(const store::WorkloadRecord& record);
  void persist(const store::ReservationRecord& record);
  void on_hello(const std::string& from, const protocol::Hello& hello);
  void send_heartbeats();
  std::string cluster_name_of(const std::string& peer_id) const;
  std::string new_uid();

  // target_role.cc
  void on_candidate(const std::string& from, const protocol::Candidate& message);
  void on_approve(const std::string& from, const protocol::Approve& message);
  void on_cancel(const std::string& from, const protocol::Cancel& message);
  void on_status_ack(const std::string& from, const protocol::StatusAck& message);
  void on_delete(const std::string& from, const protocol::Delete& message);
  void on_digest(const std::string& from, const protocol::Digest& message);
  // Stops every bound or running copy of sources whose lease ran out.
  void enforce_leases();
  // Extends `source_id`'s lease to the current message's sent_at + lease.
  void renew_lease(const std::string& source_id);
  // When the lease of `source_id` ends (ended); none when it does not fence.
  std::optional<TimePoint> lease_end_of(const std::string& source_id) const;
  // Forgets finished copies of our own cluster's work once acknowledged.
  void collect_local_garbage();
  // Stops the copy `key` still runs as of `lease_end`, its source's lease having lapsed.
  void fence_copy(const ReservationKey& key, TargetReservation& reservation, TimePoint lease_end);
  // Stops a bound or running copy here and reports it Failed with
  // `condition` (what its source decides by) and `why` (for people).
  void fail_copy(TargetReservation& reservation, protocol::CopyCondition condition,
                 const std::string& why, TimePoint at);
  // Forgets a queued candidate and releases what `key` holds at `epoch` or
  // older; bound or running work only with `stop_bound`. False when it left
  // such work alone.
  bool withdraw(const ReservationKey& key, uint64_t epoch, bool stop_bound);
  // `source` may start nothing new here: its unapproved reservations and
  // queued candidates go; with `evict` its running work is stopped and
  // reported Failed with reason Revoked.
  void withdraw_from_source(const std::string& source, const std::string& why, bool evict);
  void reject_candidate(const std::string& from, const protocol::Candidate& message,
                        const Refusal& refusal);
  void restore_reservations(std::vector<store::ReservationRecord> records);
  void apply_cluster_events();
  void expire_reservations();
  void retry_status_reports();
  void advertise_capacity(bool force);
  std::vector<protocol::NamespaceCapacity> capacity_for(const std::string& peer_id) const;
  Refusal reject_reason_for(const std::string& from, const model::WorkloadSpec& spec) const;
  void send_status(TargetReservation& reservation);
  // Runs the local scheduler over every queued candidate; READY to each one
  // it admits. Returns the reasons of those still waiting, by key.
  std::map<ReservationKey, std::string> serve_queue();
  void reserve_for(const ReservationKey& key, uint64_t epoch, const model::WorkloadSpec& spec,
                   std::vector<std::string> nodes);
  void release_reservation(const ReservationKey& key, const std::string& why);
  // Drops a finished copy's record (garbage collection); nothing to release.
  void forget_reservation(const ReservationKey& key);

  // source_role.cc
  void on_capacity(const std::string& from, const protocol::Capacity& message);
  void on_ready(const std::string& from, const protocol::Ready& message);
  void on_reject(const std::string& from, const protocol::Reject& message);
  void on_released(const std::string& from, const protocol::Released& message);
  void on_bound(const std::string& from, const protocol::Bound& message);
  void on_status(const std::string& from, const protocol::WorkloadStatus& message);
  void on_revoke(const std::string& from, const protocol::Revoke& message);
  void on_holdings(const std::string& from, const protocol::Holdings& message);
  // The winner of this epoch is chosen: persist it, APPROVE, cancel the rest.
  void choose_winner(SourceWorkload& workload, const std::string& target, const std::string& why);
  // readyWindow: approve the best READY so far (highest score, ties by name).
  void choose_best_ready(SourceWorkload& workload, const std::string& why);
  // A copy at `target` still runs while we have no winner: take it back.
  void adopt(SourceWorkload& workload, const std::string& target, uint64_t copy_epoch);
  // The copy at the winner is gone without finishing: place again now.
  void requeue_lost(SourceWorkload& workload, const std::string& why);
  void keep_outcome_of_lost_copy(SourceWorkload& workload, const std::string& from,
                                 const protocol::WorkloadStatus& message);
  // Mirrors the winner's STATUS into the workload (event and restart policy
  // on a change of phase).
  void take_copy_status(SourceWorkload& workload, const protocol::WorkloadStatus& message);
  // The copy failed: restartPolicy decides whether it is placed again,
  // unless `condition` says it never finished its work (fenced off).
  void on_copy_failed(SourceWorkload& workload, protocol::CopyCondition condition);
  void send_digests();
  // How long `peer_id` has been silent while we listened (see notice_pause).
  Duration silent_for(const std::string& peer_id) const;
  void notice_pause(TimePoint now);
  bool lost(const std::string& peer_id) const;
  // Whether a lease-renewing message (DIGEST, APPROVE) may go to this peer.
  bool may_renew_lease(const std::string& peer_id) const;
  void begin_delete(SourceWorkload& workload);
  // Retries DELETEs; true once every copy is confirmed stopped (or, for one
  // that cannot be running, given up on).
  bool drive_delete(SourceWorkload& workload, TimePoint now);
  void forget_workload(const std::string& uid);
  void start_round(SourceWorkload& workload);
  void drive_source_workloads();
  void cancel_at(SourceWorkload& workload, const std::string& peer_id, uint64_t epoch);
  struct RankedTargets {
    std::vector<std::pair<std::string, std::string>> ranked;  // (peer id, cluster), best first
    std::string reason;  // " cluster=Reason" for each target left out
  };
  // `exclude`: peers that hold another copy of the workload (left out, with
  // reason HoldsAnotherCopy, before the full-target fallback is decided).
  RankedTargets rank_targets(const model::WorkloadSpec& spec,
                             const std::set<std::string>& exclude = {}) const;
  static bool may_hold_something(const CandidateProgress& progress);
  void make_pending(SourceWorkload& workload, const std::string& reason);
  // How long after the last send an unanswered message goes again:
  // retryInterval, doubling with each resend up to 8x. A peer slow to answer
  // (a backlog, not a loss) is not buried under copies of what it has not
  // read yet; a lost message still goes again after retryInterval.
  Duration resend_after(int resends) const;
  // pendingRetry doubled `doublings` times, at most pendingRetryMax: the wait
  // before a Pending round and before a restart.
  Duration backoff(int doublings) const;
  // Incremental: sends CANDIDATE to the next batch of untried targets.
  void ask_next_batch(SourceWorkload& workload);
  SourceWorkload* find_source_workload(const std::string& uid);
  // One workload's timers: retries, rounds, deletes, a lost winner.
  void drive_source_workload(const std::string& uid, SourceWorkload& workload, TimePoint now,
                             std::vector<std::string>& deleted);
  // Nothing for drive_source_workload to do until the workload changes
  // (persist) or a CANCEL is owed (cancel_at), both of which wake it.
  static bool is_quiet(const SourceWorkload& workload);
  // A multi-cluster workload's own row: it runs no rounds, its copies do.
  static bool is_group(const SourceWorkload& workload) {
    return workload.record.parent.empty() && workload.record.spec.placement.number_of_clusters > 1;
  }
  // Recomputes a group's phase and reason from its copies, and persists it.
  void update_group(const std::string& group_uid);
  // Whether a copy of `record` may run at `target` (adoption checks what a
  // READY would have needed: invitation, allow list, nominations, siblings).
  bool may_place_at(const store::WorkloadRecord& record, const std::string& target) const;
  // The peers where other copies of this workload's group are placed or ran.
  std::set<std::string> sibling_winners(const store::WorkloadRecord& record) const;

  AgentConfig config_;
  crypto::Identity identity_;
  std::string self_id_;
  const Clock& clock_;
  Transport& transport_;
  store::Store& store_;
  cluster::Cluster& cluster_;
  Rng& rng_;
  std::shared_ptr<spdlog::logger> logger_;

  uint64_t boot_ = 0;
  uint64_t seq_ = 0;
  AgentStats stats_;
  Status store_health_;  // the first store write failure, surfaced to the runtime

  std::map<std::string, Peer> peers_;
  std::map<std::string, OwnedInvitation> issued_;    // by invitation id
  std::map<std::string, OwnedInvitation> accepted_;  // by invitation id
  std::map<std::string, SourceWorkload> workloads_;  // by uid
  // The uids of workloads_ the source timers must visit: every one that is
  // not quiet (is_quiet). A change (persist) or an owed CANCEL wakes one.
  std::set<std::string> awake_;
  std::map<std::string, std::string> uid_by_name_;   // "ns/name" -> uid (top-level only)
  std::map<std::string, std::vector<std::string>> copies_;  // group uid -> copy uids
  std::map<ReservationKey, TargetReservation> reservations_;
  std::map<ReservationKey, QueuedCandidate> queued_;
  // Lower bounds on when the reservation scans have work: an unapproved
  // reservation expires, or an unacknowledged STATUS is due again. Kept
  // low when in doubt (a scan that finds nothing costs only time).
  TimePoint next_reservation_expiry_{};
  TimePoint next_status_retry_{};
  uint64_t arrivals_ = 0;
  std::deque<protocol::Body> local_inbox_;  // messages from this agent to itself
  std::map<std::string, TimePoint> last_drop_log_;
  TimePoint last_heartbeat_{};
  TimePoint last_gc_{};
  // Since when we have been listening without a break (start, or the end
  // of a pause): a peer's silence is counted from here at the earliest.
  TimePoint listening_since_{};
  TimePoint last_tick_{};
  TimePoint current_sent_at_{};  // the envelope time of the message being handled
  bool capacity_changed_ = false;

 public:
  // The first failed store write since start, if any: the runtime must not
  // commit or send after one (it rolls back and rebuilds the agent from the
  // store, read-only while writes keep failing).
  const Status& store_health() const { return store_health_; }
  uint64_t boot() const { return boot_; }
};

}  // namespace shoal::core
