// The target role (protocol/README.md): answer CANDIDATE with a reservation
// (READY) or a reason (REJECT); queue what fits but not now, and serve the
// queue in the local scheduler's fair-share order; bind on APPROVE; release
// on CANCEL, DELETE or expiry; stop what a lapsed lease no longer covers;
// report every status change until the source acknowledges it; advertise
// free room to each invited source.
//
// Parts that own their state: ReservationTable (the reservations, and what
// each source holds here), RoutingCounts (what weighted routing reads,
// kept as work binds, ends and queues), Advertiser (what each source is
// told of our room, and when) and LeasePlan (the earliest lease end that
// may need a copy fenced).
//
// Files, all in this folder: role.cc (admission, the queue, binding),
// preemption.cc (priorities, an invitation's ceiling and whom it may
// preempt, offers and their APPROVE), release.cc (CANCEL, DELETE, expiry,
// a hosted copy stopped), copies.cc (the life of a bound copy, its
// reports, expiry, restore, the timers), leases.cc (digests, leases and
// fencing, start timeouts, logs); each part in its own files; rules.h
// (functions of a record, an invitation's limits or the cluster: a copy's
// start deadline, a priority's ceiling, a READY's score).
//
// Launches are effects: a copy bound in a step is started on the cluster
// only after the batch that made it Bound commits (launch_bound), so no
// work runs that the store does not know of.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/core/context.h"
#include "agent/core/invitation_book.h"
#include "agent/core/peer_table.h"
#include "agent/core/target/advertiser.h"
#include "agent/core/target/lease_plan.h"
#include "agent/core/target/reservation_table.h"
#include "agent/core/target/routing_counts.h"
#include "agent/core/target/rules.h"

namespace shoal::core::target {

class TargetRole {
 public:
  // The cluster's key for a copy: "<source>/<uid>" (cluster::LaunchRequest).
  static std::string cluster_key(const std::string& source, const std::string& uid) {
    return source + "/" + uid;
  }
  using ReservationKey = std::pair<std::string, std::string>;  // (source id, uid)

  TargetRole(Context& context, PeerTable& peers, const InvitationBook& invitations);

  // Loading: what held resources holds them again on the cluster; what was
  // bound or running is launched again by the next launch_bound().
  void restore(std::vector<store::ReservationRecord> records);

  void on_candidate(const std::string& from, const protocol::Candidate& message);
  void on_approve(const std::string& from, const protocol::Approve& message);
  void on_cancel(const std::string& from, const protocol::Cancel& message);
  void on_status_ack(const std::string& from, const protocol::StatusAck& message);
  void on_delete(const std::string& from, const protocol::Delete& message);
  void on_digest(const std::string& from, const protocol::Digest& message);
  void on_priority(const std::string& from, const protocol::Priority& message);
  // A piece of the output of a copy this cluster runs or ran for `from`,
  // and only for `from`: the cluster keys its work by source, so another
  // source's uid reads as not found.
  void on_log_request(const std::string& from, const protocol::LogRequest& message);
  // Serves the queue once for every CANDIDATE queued or asked again since
  // the last call: READY to what is admitted, REJECT NoCapacity to those
  // of them still waiting. False when nothing was asked. The router calls
  // it at the end of every step (Router::drain_local).
  bool serve_asked();
  // The role's timers, in order: cluster events, leases, start timeouts,
  // expiry, the queue, STATUS retries, advertisements, garbage.
  // `previous_pass`: set when this tick is a heartbeat pass (Agent::tick,
  // every half interval) — a source that has had no CAPACITY in the last
  // three passes gets one, so each hears it at least every other interval
  // (and a HELLO in between, when nothing else goes to it). Returns whether
  // room was freed in this step.
  bool tick(TimePoint now, std::optional<TimePoint> previous_pass);
  // What each invited source is told of our room (CAPACITY).
  Advertiser& advertiser() { return advertiser_; }
  // The counts weighted routing reads (/v1/metrics too).
  const RoutingCounts& counts() const { return counts_; }
  // Every source hears our capacity at the next tick (an invitation changed).
  void note_capacity_changed() { capacity_changed_ = true; }
  // Starts on the cluster every copy bound (or restored) since the last
  // call. Call after the batch commits. A launch that fails is reported
  // Failed (StartFailed) by the next tick.
  void launch_bound();
  bool has_launches() const { return !to_launch_.empty(); }
  // The earliest time tick() has something to do (TimePoint::max(): nothing
  // timed; cluster events and messages come on their own).
  TimePoint next_deadline() const;

  // `source` may start nothing new here: its unapproved reservations and
  // queued candidates go; with `evict` its running work is stopped and
  // reported Failed with condition Revoked.
  void withdraw_from_source(const std::string& source, const std::string& why, bool evict);
  // Operator action (see Operations::stop_hosted).
  Status stop_hosted(const std::string& namespace_name, const std::string& name,
                     const std::string& from_cluster);

  // Resources `source` holds here (reserved or bound, not finished).
  InvitationUsage usage_of_source(const std::string& source) const;
  // Whether `source` holds anything here (the handshake admits it).
  bool holds_work_of(const std::string& source) const { return table_.holds_work_of(source); }
  std::vector<store::ReservationRecord> reservations() const;
  // One node per replica for what holds resources; no deadline hides
  // before the bounds that let tick() skip its scans.
  // "" while every invariant holds, else the first broken one.
  std::string broken_invariant() const;

 private:
  using TargetReservation = ReservationTable::Entry;
  // A candidate that fits this cluster but not its free room now. It waits
  // in memory (a restart forgets it; the source's retry re-queues it) and is
  // reserved, in fair-share order, when room frees.
  // A candidate waiting in the cluster's queue (Cluster::enqueue), which
  // keeps it in the order the local scheduler serves it.
  struct QueuedCandidate {
    uint64_t epoch = 0;
    model::WorkloadSpec spec;
    TimePoint hold_until{};
    // A READY that costs preemption went out for this epoch: its APPROVE
    // preempts (approve_by_preemption). Nothing is stopped before.
    bool offered_preemption = false;
  };
  struct FailedLaunch {
    ReservationKey key;
    uint64_t epoch = 0;
    std::string why;
  };
  // Why a CANDIDATE is refused: the code the source decides by, and the
  // text people read. None (false) when it is not.
  struct Refusal {
    protocol::RejectCode code = protocol::RejectCode::kOther;
    std::string reason;
    explicit operator bool() const { return !reason.empty(); }
  };

  // Every change of a reservation's record goes through here: written,
  // and followed by the table (what its source holds, the counts). The
  // spec is written only by persist_with_spec: a new reservation, and a
  // new priority (encoding it was a tenth of a busy target's CPU).
  void persist(const store::ReservationRecord& record) {
    Status written = context_.store().update_reservation_status(record);
    if (written.code() == ErrorCode::kNotFound) written = context_.store().put_reservation(record);
    context_.note_store(written);
    table_.follow(record);
  }
  void persist_with_spec(const store::ReservationRecord& record) {
    context_.note_store(context_.store().put_reservation(record));
    table_.follow(record);
  }

  RoutingCounts counts_;
  ReservationTable table_{counts_};
  Advertiser advertiser_;
  // role.cc, preemption.cc and release.cc: admission, binding, letting go.
  Refusal reject_reason_for(const std::string& from, const model::WorkloadSpec& spec) const;
  // None when `spec` fits the limits of `from`'s invitation on top of what
  // it holds here; else QuotaExceeded:<resource>.
  Refusal limit_refusal(const std::string& from, const model::WorkloadSpec& spec) const;
  void reject_candidate(const std::string& from, const protocol::Candidate& message,
                        const Refusal& refusal);
  // One pass of the local scheduler over the queue; READY to each candidate
  // it reserves (or a REJECT, if its source may no longer have it).
  void serve_queue();
  // Puts a candidate in line, here and in the cluster's queue; forgets one,
  // in both. Every change to queued_ goes through these two.
  void queue_candidate(const ReservationKey& key, QueuedCandidate candidate);
  void unqueue(std::map<ReservationKey, QueuedCandidate>::iterator it);
  // The source changed the priority of `key`'s workload: what waits here at
  // `epoch` or older is queued again in its new place (behind what waits
  // at that priority already), and a copy held or run here keeps it.
  void take_priority(const ReservationKey& key, uint64_t epoch, int32_t priority);
  // Room the cluster now holds for `key`: filed, and offered by READY, or
  // bound at once if the step read it approved in advance (approved_now_).
  void reserve_for(const ReservationKey& key, uint64_t epoch, const model::WorkloadSpec& spec,
                   std::vector<std::string> nodes);
  // Binds a reservation its source approved (an APPROVE, or a CANDIDATE
  // approved in advance sealed at `renewal_sent_at_ms`, which renews the
  // source's lease first): launched once this batch commits, BOUND sent.
  void bind(const ReservationKey& key, TargetReservation& reservation, int64_t renewal_sent_at_ms);
  // Files the reservation of room the cluster now holds for `key`; its
  // READY score.
  double file_reservation(const ReservationKey& key, uint64_t epoch, const model::WorkloadSpec& spec,
                          std::vector<std::string> nodes);
  // The limits of `source`'s current invitation here; null for our own
  // cluster and for a source without a valid one.
  const crypto::InvitationLimits* guest_limits(const std::string& source) const;
  // Whose running work (by cluster key) the cluster may stop for
  // `source`'s: its own; for our own work, also preemptible guests'; for
  // a guest that is not preemptible, also preemptible guests'. Never our
  // own work for a guest, nor a guest's for one that is itself preemptible.
  std::function<bool(const std::string&)> may_preempt_for(const std::string& source) const;
  // A queued candidate that fits only by preemption: READY with the cost,
  // and nothing stopped yet. False when preemption would not make room.
  bool offer_preemption(const ReservationKey& key, QueuedCandidate& entry);
  // A CANDIDATE its invitation admits, its priority as granted: queued,
  // and served at the end of the step (serve_asked).
  void on_admissible_candidate(const std::string& from, const protocol::Candidate& message);
  // The APPROVE of an offer (queued under its epoch, offered_preemption):
  // room taken now (free, or else by preempting what a fresh plan picks),
  // filed as a reservation the approval then binds. False, with a REJECT
  // sent, when neither makes room any more.
  bool approve_by_preemption(const ReservationKey& key, const protocol::Approve& message);
  // Forgets a queued candidate and releases what `key` holds at `epoch` or
  // older; bound or running work only with `stop_bound`. False when it left
  // such work alone.
  bool withdraw(const ReservationKey& key, uint64_t epoch, bool stop_bound);
  void release_reservation(const ReservationKey& key, const std::string& why);
  // Drops a finished copy's record (garbage collection); nothing to release.
  void forget_reservation(const ReservationKey& key);

  // copies.cc: the life of a bound copy.
  // Stops a bound or running copy here and reports it Failed with
  // `condition` (what its source decides by) and `why` (for people).
  void fail_copy(TargetReservation& reservation, protocol::CopyCondition condition,
                 const std::string& why, TimePoint at);
  // A record restore() could not hold room for: Failed, LostOnRestart.
  void lose_on_restart(store::ReservationRecord& record, const Status& why);
  // `lazily`: in the next envelope to its source, or within lazy_delay
  // (what a cluster observed: nobody waits on it, and at everyday rates a
  // report in an envelope of its own cost a signature and a commit at each
  // end).
  void send_status(TargetReservation& reservation, bool lazily = false);
  void apply_cluster_events();
  void fail_launches();
  void expire_reservations();
  void retry_status_reports();
  // Extends `source_id`'s lease to the current message's sent_at + lease.
  void renew_lease(const std::string& source_id);
  void renew_lease(const std::string& source_id, int64_t sent_at_ms);
  // Stops every bound or running copy of sources whose lease ran out.
  void enforce_leases();
  // Stops the copy `key` still runs as of `lease_end`, its source's lease having lapsed.
  void fence_copy(const ReservationKey& key, TargetReservation& reservation, TimePoint lease_end);
  // A copy was bound (or restored bound): its start deadline joins the plan.
  void note_start_deadline(const store::ReservationRecord& record) {
    next_start_deadline_ = std::min(next_start_deadline_, start_deadline(record));
  }
  // Gives up every bound copy its cluster has not started by its deadline:
  // stopped here and reported Failed with condition StartTimeout, which
  // its source places again elsewhere.
  void give_up_unstarted();
  // Forgets finished copies of our own cluster's work once acknowledged.
  void collect_local_garbage();
  Context& context_;
  PeerTable& peers_;
  const InvitationBook& invitations_;
  const AgentConfig& config_;
  const std::string& self_id_;
  const Clock& clock_;
  cluster::Cluster& cluster_;

  std::map<ReservationKey, QueuedCandidate> queued_;
  std::unordered_map<std::string, ReservationKey> queued_by_cluster_key_;  // of queued_
  std::set<ReservationKey> asked_;  // queued or asked again, not yet served (serve_asked)
  // CANDIDATEs approved in advance (protocol::Candidate::approved) that this
  // step read for an epoch new here, with their envelope's seal time. Room
  // held for one before the step ends binds it; serve_asked forgets them
  // all, so that room found later is offered by READY and binds only on an
  // APPROVE: the source may have moved on once it heard our answer.
  struct ApprovedInAdvance {
    uint64_t epoch = 0;
    int64_t sent_at_ms = 0;
  };
  std::map<ReservationKey, ApprovedInAdvance> approved_now_;
  // Bound (or restored) since the last launch_bound(), by key and epoch.
  std::vector<std::pair<ReservationKey, uint64_t>> to_launch_;
  std::vector<FailedLaunch> failed_launches_;
  // Lower bounds on when the reservation scans have work: an unapproved
  // reservation expires, or an unacknowledged STATUS is due again. Kept
  // low when in doubt (a scan that finds nothing costs only time).
  TimePoint next_reservation_expiry_{};
  TimePoint next_status_retry_{};
  TimePoint next_queue_expiry_ = TimePoint::max();
  TimePoint next_start_deadline_ = TimePoint::max();  // no bound copy's start deadline is earlier
  // When enforce_leases may have something to fence.
  LeasePlan lease_plan_{peers_, table_};
  TimePoint last_gc_{};
  bool capacity_changed_ = false;  // room freed (or the invitations changed): tick now
  // Room taken by a reservation, or the routing counts moved (counts_):
  // advertised at the next tick, not at once. Most reservations of an
  // AllAtOnce round are released within a round trip, before that tick, and
  // then no source needs to hear of either; a source's own reservations it
  // counts itself until our CAPACITY does (TargetLedger::Target::unadvertised).
  bool counts_changed_ = false;
};

}  // namespace shoal::core::target
