// The source role (protocol/README.md): place each submitted workload on
// exactly one cluster (or on N, one copy each, for numberOfClusters > 1).
// Rank the targets, send CANDIDATE as the dispatcher says, take a winner
// among the READYs (persisted before APPROVE leaves), CANCEL the rest,
// mirror the winner's STATUS, restart by restartPolicy, re-place what a
// lost or fenced target no longer runs, reconcile with DIGEST/HOLDINGS
// (which renew the targets' leases), and delete everywhere on request.
//
// Parts that own their state: SourceBook (the workloads, their names,
// groups, counts and watches), TargetLedger (what each target advertised,
// our lease renewals, our work it does not count yet), PlacementWindow
// (whose round is in flight, and the lines waiting for a slot or for
// quota), DueIndex (which workloads the timers visit, and when),
// ParkingLot (Pending work that waits only for a time, out of DueIndex
// until then), SourceLeases (silences, lease renewals, worker-lost times,
// the DIGEST plan and the DIGESTs, one ahead of what binds).
//
// Files, all in this folder: role.cc (submit, the window, rounds),
// placement.cc (the live inventory, ranking by the placement engine),
// answers.cc (CAPACITY, READY/REJECT,
// the winner, RELEASED and BOUND), copies.cc (the winner's copy: status,
// restarts, worker-lost, reconciliation), timers.cc (the tick, due times,
// driving each awake workload), groups.cc (multi-cluster groups,
// nominations, priorities, loading, views, invariants), deletion.cc
// (deleting everywhere), quota.cc (federation-wide quotas); each part in
// its own files. The rules over one workload are functions beside it:
// workload.h (its own state) and dispatch_rules.h (with the config: the
// dispatchers, the wait for the first-ranked target, backoff).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "agent/core/context.h"
#include "agent/core/invitation_book.h"
#include "agent/core/peer_table.h"
#include "agent/core/source/book.h"
#include "agent/core/source/dispatch_rules.h"
#include "agent/core/source/due_index.h"
#include "agent/core/source/leases.h"
#include "agent/core/source/parking_lot.h"
#include "agent/core/source/placement_window.h"
#include "agent/core/source/target_ledger.h"
#include "agent/core/source/workload.h"
#include "agent/placement/engine.h"

namespace shoal::core::source {

class SourceRole : private DueIndex::Times {
 public:
  // Our own cluster's counts (the target role keeps them).
  using LocalFacts = std::function<protocol::Capacity(const std::string& namespace_name)>;
  SourceRole(Context& context, const PeerTable& peers, const InvitationBook& invitations,
             LocalFacts local_facts);

  // Loading: every stored workload; unfinished rounds start again with a new
  // epoch, a persisted winner is approved again, interrupted deletes go on.
  void load(std::vector<store::WorkloadRecord> records);

  // Operators' requests (see Operations).
  Result<std::vector<std::string>> submit(const std::vector<model::WorkloadSpec>& specs);
  Status delete_workload(const std::string& namespace_name, const std::string& name);
  // A delete that does not wait for the targets to confirm: DELETEs go
  // out as for delete_workload, then the workload is forgotten at once.
  // A copy at a target that never answers cannot run on unseen: the target
  // fences it when our lease there lapses, and one that answers again
  // reports it in HOLDINGS, which a DELETE answers (on_holdings).
  Status force_delete(const std::string& namespace_name, const std::string& name);
  Status nominate(const std::string& namespace_name, const std::string& name,
                  const std::vector<std::string>& clusters);
  // A pending or placed workload's new priority: its place among ours
  // waiting for a slot, and (PRIORITY) at every target that may queue,
  // hold or run a copy of it. Finished or deleting work is refused.
  Status set_priority(const std::string& namespace_name, const std::string& name, int32_t priority);

  void on_capacity(const std::string& from, const protocol::Capacity& message);
  void on_ready(const std::string& from, const protocol::Ready& message);
  void on_reject(const std::string& from, const protocol::Reject& message);
  void on_released(const std::string& from, const protocol::Released& message);
  void on_bound(const std::string& from, const protocol::Bound& message);
  void on_status(const std::string& from, const protocol::WorkloadStatus& message);
  void on_holdings(const std::string& from, const protocol::Holdings& message);
  // A target's first HELLO of a boot: reconcile with it at the next tick.
  void greet_target(const std::string& target);
  // The operator forgot `target` (PeerTable::forget): nothing more is
  // placed there, and its copies and the DELETEs owed to it come due at
  // their fence (SourceLeases::worker_lost_at, let_go_at), which it
  // returns (now, when fencing is off).
  TimePoint lose_target(const std::string& target);
  // An authentic envelope from `peer` ended a silence of `silence`: a
  // target too long silent to renew its lease may be renewed again
  // (next_deadline).
  void heard_from(const std::string& peer, Duration silence);
  // Every peer's silence counts from now (PeerTable::notice_tick): a target
  // silent too long to renew may be renewable again, and an APPROVE or a
  // DIGEST it is owed due now.
  void silences_restarted();

  // The role's timers: retries, rounds, restarts, deletes, worker-lost, and
  // the digests that renew leases. `local_room_freed`: our own cluster has
  // room again, so pending work that fits there tries at once.
  void tick(TimePoint now, bool local_room_freed);
  // Starts the rounds of waiting workloads while the placement window has
  // room (AgentConfig::placement_window). Returns whether it started any;
  // the router calls it at the end of every step.
  bool admit_waiting();
  // Starts the rounds of workloads that waited for their namespace's
  // federation-wide quota while it now leaves room (and a slot is free),
  // highest priority first. Returns whether it started any; the router
  // calls it at the end of every step, as admit_waiting().
  bool admit_within_quota();

  // quota.cc: federation-wide quotas (model/quota.h). Set replaces
  // the namespace's quota; both are written in this step's batch.
  Status set_quota(const model::QuotaSpec& quota);
  Status delete_quota(const std::string& namespace_name);
  void load_quotas(std::vector<model::QuotaSpec> quotas);
  const std::map<std::string, model::QuotaSpec>& quotas() const { return quotas_; }
  // How many of `namespace_name`'s workloads wait for its quota now.
  size_t waiting_for_quota(const std::string& namespace_name) const;
  // Takes a winner for each workload that got its first READYs in this
  // batch: the best score among them (ties by cluster name). Returns whether
  // there was any; the router calls it when the batch ends (finish_batch),
  // so READYs from different targets read in one loop iteration compete.
  bool decide_readied();
  // The earliest time tick() has something to do (brings the due-time
  // index up to date with what was touched since).
  TimePoint next_deadline();

  // The workloads and their views (listings, counts, watches).
  const SourceBook& book() const { return book_; }
  SourceBook& book() { return book_; }
  // What we know of each target (its advertised room, our lease renewals).
  const TargetLedger& targets() const { return targets_; }
  TargetLedger& targets() { return targets_; }
  // The book's counts, and what the timers walk.
  WorkloadCounts workload_counts() const;
  // What this source knows of every cluster it may place on, for a
  // workload of `namespace_name` and `queue`: its own cluster and each
  // target, as the placement engine reads them (free room less what this
  // source sent there since the target last advertised, counts plus it).
  std::vector<LiveCluster> live_inventory(const std::string& namespace_name,
                                          const std::string& queue) const;

  // A source workload with a winner is past Pending; every workload with
  // anything left to do is visited by the timers; a group's copies sit on
  // different clusters.
  // "" while every invariant holds, else the first broken one.
  std::string broken_invariant();

 private:
  struct RankedTargets {
    std::vector<std::pair<std::string, std::string>> ranked;  // (peer id, cluster), best first
    std::map<std::string, double> engine_score;               // by peer id
    std::string reason;  // " cluster=Reason" for each target left out
    std::string decision;  // the engine's steps, abbreviated, for the events
    bool queueing = false;  // nobody has room: ranked are those that would queue it
  };
  // Whom a round of `workload` would ask now, as its dispatcher picks them;
  // the later batches (Incremental, Preferred) go to `untried`.
  RankedTargets round_targets(const SourceWorkload& workload,
                              std::vector<std::pair<std::string, std::string>>* untried);
  // Whether this round's CANDIDATE goes approved in advance
  // (protocol::Candidate::approved), two messages and a commit at each end
  // fewer: the round asks one target, not ourselves, for a plain workload
  // without a readyWindow; that target advertised room, may have its lease
  // renewed, and was heard from within a fifth of retryInterval (200 ms by
  // default). Until an approved target answers, only worker-lost handling
  // can take the workload back, so one that stopped a moment ago must not
  // be approved; one that is working sends something within its lazy delay.
  bool approves_in_advance(const SourceWorkload& workload, const RankedTargets& targets) const;
  // Parked work that a round would send to the very targets that queue it:
  // re-sends the same epoch's candidates (the targets keep its place in
  // line) and parks it again. False if it needs a real round.
  bool renew_queued(SourceWorkload& workload);

  // Writes the record and wakes it for the timers (a group is recomputed).
  void persist(const store::WorkloadRecord& record);

  // role.cc: rounds.
  // The window is full: `workload` waits (Pending, WaitingForSlot) until
  // admit_waiting() starts its round.
  void wait_for_slot(SourceWorkload& workload);
  // `workload` waits Pending in `line` of the window, with `reason`.
  void wait_in_line(SourceWorkload& workload, std::string_view line, const std::string& reason);
  // Whether `workload` (not holding quota yet) must wait for its
  // namespace's quota: then it waits, Pending with QuotaExceeded, or (more
  // than the whole quota) is Pending until the quota changes.
  bool held_by_quota(SourceWorkload& workload);
  // Whether `workload`, Pending, may not take a READY now: its namespace's
  // quota has no room for it, or others wait for that room first. A target
  // may serve a candidate from its queue long after the round that sent it.
  bool beyond_quota(const SourceWorkload& workload) const;
  // `target` answered READY, but a sibling copy runs there: cancel it and
  // count the answer as a HoldsAnotherCopy refusal.
  void refuse_for_sibling(SourceWorkload& workload, const std::string& target, uint64_t epoch);
  // placement.cc: where work can go.
  // Every target of `record` by its placement policy, through the
  // placement engine over live_inventory(); the other copies of its group
  // count as placed (never candidates, but counted by the spread).
  RankedTargets rank_targets(const store::WorkloadRecord& record);
  void start_round(SourceWorkload& workload);
  // Incremental: sends CANDIDATE to the next batch of untried targets.
  void ask_next_batch(SourceWorkload& workload);
  void make_pending(SourceWorkload& workload, const std::string& reason);
  // CANCELs `epoch` (and older) at `peer_id` until RELEASED or the
  // reservation must have expired; a no-op while one for `epoch` or a newer
  // epoch is pending there (one CANCEL per workload, epoch and target).
  void cancel_at(SourceWorkload& workload, const std::string& peer_id, uint64_t epoch);
  // The winner of this epoch is chosen: persist it, APPROVE, cancel the rest.
  void choose_winner(SourceWorkload& workload, const std::string& target, const std::string& why);
  // readyWindow: approve the best READY so far (highest score, ties by name).
  // `spread_ties`: equal scores go by a hash of (uid, cluster) instead of by
  // name, so equally roomy targets share the work rather than the first
  // name taking all of it.
  void choose_best_ready(SourceWorkload& workload, const std::string& why,
                         bool spread_ties = false);
  // The workload a message names, touched for the timers (null: gone).
  SourceWorkload* find_source_workload(const std::string& uid);

  // copies.cc: the winner's copy.
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
  // unless `condition` says its job did not cause the end (a disruption,
  // placed again, and kept from that target for kAvoidDisruptingTarget when
  // the target chose the end) or the cluster could not start it.
  void on_copy_failed(SourceWorkload& workload, protocol::CopyCondition condition);
  // Ends `workload` Failed, past its budget, instead of placing it again;
  // `last` says what ended its last copy.
  void fail_past_budget(SourceWorkload& workload, bool disruption, const std::string& last);
  static constexpr Duration kAvoidDisruptingTarget = std::chrono::minutes(5);
  void drive_source_workloads(TimePoint now);
  // One workload's timers: retries, rounds, deletes, a lost winner.
  void drive_source_workload(const std::string& uid, SourceWorkload& workload, TimePoint now,
                             std::vector<std::string>& deleted);
  // No winner, READYs in, and no longer waiting for the first-ranked
  // target: takes the best READY and returns true.
  bool decide_after_preferred_wait(SourceWorkload& workload, TimePoint now);
  // When drive_source_workload next has something to do for it: the
  // earlier of these two. The workload's own due time: everything but
  // worker-lost handling.
  using ResendBound = DueIndex::ResendBound;
  TimePoint own_due_at(const SourceWorkload& workload, ResendBound bound = ResendBound::kNow) const;
  // DueIndex::Times, by uid: the due times the index files by.
  std::optional<TimePoint> own_due(const std::string& uid, ResendBound bound) const override;
  const std::string* watched(const std::string& uid) const override;
  // When copies at this winner may be called lost (SourceLeases): shared by
  // all of them, and moved later by every envelope from it, so kept per
  // winner, not in each workload's key.
  TimePoint lost_at(const std::string& winner) const override {
    return leases_.worker_lost_at(winner);
  }

  // groups.cc and deletion.cc: groups, nominations, deletion.
  // Recomputes a group's phase and reason from its copies, and persists it.
  void update_group(const std::string& group_uid);
  // Whether a copy of `record` may run at `target` (adoption checks what a
  // READY would have needed: invitation, allow list, nominations, siblings).
  bool may_place_at(const store::WorkloadRecord& record, const std::string& target) const;
  void begin_delete(SourceWorkload& workload);
  // Retries DELETEs; true once every copy is confirmed stopped (or, for one
  // that cannot be running, given up on).
  bool drive_delete(SourceWorkload& workload, TimePoint now);
  void forget_workload(const std::string& uid);

  Context& context_;
  const PeerTable& peers_;
  const InvitationBook& invitations_;
  const AgentConfig& config_;
  const std::string& self_id_;
  const Clock& clock_;
  cluster::Cluster& cluster_;
  LocalFacts local_facts_;

  SourceBook book_;
  TargetLedger targets_;
  SourceLeases leases_{context_, peers_, targets_, book_};
  // The workloads the timers visit: every one that is not quiet
  // (is_quiet). A change (persist) or an owed CANCEL wakes one; a tick
  // visits those whose time has come, not all of them.
  DueIndex due_{*this};
  // Pending workloads that room somewhere may help now: woken at once when
  // room frees at home or a target advertises it. Not those whose every
  // candidate waits in its target's queue ("NoCapacity:", waits_in_every_queue):
  // that queue READYs them in its order, and waking 100,000 of them on each
  // freed slot only re-sent their candidates. Kept by persist and
  // make_pending; what left Pending is dropped when next met.
  std::set<std::string> room_waiters_;
  ParkingLot parked_{due_};
  // Whose round is in flight (holds_slot, kept by persist), and who waits
  // for a slot.
  PlacementWindow window_{config_.placement_window};
  bool admitting_ = false;  // admit_waiting() is on the stack
  std::map<std::string, model::QuotaSpec> quotas_;  // by namespace
  // The namespace whose quota line admit_within_quota() serves ("" none):
  // its head goes before the others in line, as admitting_ lets a slot's.
  std::string serving_quota_;
  // Workloads without a winner that got a READY in this batch (decide_readied).
  std::set<std::string> readied_;
};

}  // namespace shoal::core::source
