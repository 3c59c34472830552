// One workload as the source role tracks it: its stored record and the
// state of its placement round, its copy and its delete, none of which is
// stored (a restart starts a new round from the record).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/core/context.h"
#include "common/time.h"
#include "model/quota.h"
#include "protocol/messages.h"
#include "store/records.h"

namespace shoal::core::source {

// Where one target stands with this round's CANDIDATE.
enum class CandidateState { kSent, kReady, kRejected };
struct CandidateProgress {
  CandidateState state = CandidateState::kSent;
  protocol::RejectCode code = protocol::RejectCode::kOther;  // when kRejected
  std::string reason;                                        // for people
  TimePoint last_sent{};
  double score = 0;  // from the first READY of this epoch
  // What its READY would cost in preemption (0: its room is held now).
  uint32_t victims = 0;
  int32_t victim_priority = 0;
  int resends = 0;   // CANDIDATE re-sent this often so far (Context::resend_at)
};

// A CANCEL owed to one target, re-sent until RELEASED or its reservation
// must have expired.
struct PendingCancel {
  uint64_t epoch = 0;
  TimePoint last_sent{};
  TimePoint give_up_at{};
  int resends = 0;
};

// A DELETE owed to one target while the workload is being deleted.
struct PendingDelete {
  uint64_t epoch = 0;
  TimePoint last_sent{};
  std::optional<TimePoint> give_up_at;  // none for a copy that may still run
};

struct SourceWorkload {
  store::WorkloadRecord record;
  int pending_attempts = 0;  // rounds in a row that ended Pending: the backoff exponent
  // Waits in every target's queue (waits_in_every_queue): asleep, off the
  // timers' walk, until its next round refreshes the queues' hold
  // (parked_), or until a change (persist) wakes it. {} when not parked.
  TimePoint parked_until{};
  // What SourceBook's counts hold for it (top-level workloads only): the
  // phase and start last counted, so counts cost nothing to read.
  std::optional<model::Phase> counted_phase;
  bool counted_started = false;
  // Counted in its namespace's federation-wide quota usage (SourceBook::held_in).
  bool counted_in_quota = false;
  std::string unasked;       // " cluster=Reason" for each target this round left out
  std::map<std::string, CandidateProgress> candidates;  // by target peer id, this epoch
  std::map<std::string, PendingCancel> cancels;         // by target peer id
  std::map<std::string, PendingDelete> deletes;         // by target peer id, while deleting
  TimePoint round_started{};
  TimePoint wave_started{};  // Incremental, Preferred: when the last batch of candidates went out
  std::vector<std::pair<std::string, std::string>> untried;  // ranked, not asked yet
  // This round asked its first-ranked target alone (Preferred): READYs of
  // the others, asked later, wait for it only until preferredWait after
  // the round began, not after they came.
  bool asked_preferred_alone = false;
  TimePoint last_approve_sent{};
  int approve_resends = 0;
  // The winner was made so with this round's CANDIDATE, approved in
  // advance, and has not answered it yet (memory only: after a restart the
  // source re-sends APPROVE, as to any winner). A REJECT now means it had
  // no room to bind at once, and the round goes on without it.
  bool approved_in_advance = false;
  TimePoint next_round_at{};
  // Non-zero while it waits in a line of the placement window (for a slot,
  // or for its namespace's quota): its place there, after priority, and
  // which line (PlacementWindow::kSlotLine or quota_line(namespace)).
  uint64_t waiting_ticket = 0;
  std::string waiting_line;
  // The target this workload is counted at while its target's CAPACITY
  // does not count it yet (expect_at): the round's first-ranked, then its
  // winner. `acknowledged`: the winner said BOUND, so the next CAPACITY
  // from it counts the workload. "" when not counted anywhere.
  std::string expected_at;
  bool acknowledged = false;
  std::string advertised_by;  // the winner whose CAPACITY counts it now ("" none yet)
  // Where it counts in Target::ours ("" nowhere): its winner until it
  // finishes, or while placing, the round's first-ranked target.
  std::string counted_at;
  std::string preferred;  // this round's first-ranked target ("" none)
  TimePoint first_ready_at{};  // of this round, not yet decided on; {} when none
  std::map<std::string, double> engine_scores;  // this round's, by target peer id
  // Targets that ended a copy of it for a reason not its job's own
  // (on_copy_failed), and until when no round asks them (memory only).
  std::map<std::string, TimePoint> avoid_until;
  // The envelope of the newest STATUS taken from the winner (memory
  // only): a HOLDINGS sealed before it is a snapshot older than what we
  // know, and cannot show the copy lost (on_holdings).
  std::string last_status_from;
  Context::EnvelopeOrder last_status_order;
};

// ---- what a workload's own state says (the role's rules over one) ----

// A multi-cluster workload's own row: it runs no rounds, its copies do.
inline bool is_group(const SourceWorkload& workload) {
  return workload.record.parent.empty() && workload.record.spec.placement.number_of_clusters > 1;
}

// Whether a round of `record` is in flight (holds a slot of the window).
inline bool holds_slot(const store::WorkloadRecord& record) {
  bool group = record.parent.empty() && record.spec.placement.number_of_clusters > 1;
  return record.phase == model::Phase::kPlacing && record.winner.empty() && !record.deleting &&
         !group;
}

// Incremental's batch of candidates: incrementalBatch, at least one.
inline size_t incremental_batch(const store::WorkloadRecord& record) {
  return static_cast<size_t>(std::max(1, record.spec.placement.incremental_batch));
}

// Whether a target may hold something of this round: a NoCapacity REJECT
// means it queued the candidate.
inline bool may_hold_something(const CandidateProgress& progress) {
  return progress.state != CandidateState::kRejected ||
         progress.code == protocol::RejectCode::kNoCapacity;
}

// Every target of this round was asked and answered "NoCapacity:" (the
// candidate waits in its queue, a READY may follow).
inline bool waits_in_every_queue(const SourceWorkload& workload) {
  if (workload.candidates.empty() || !workload.untried.empty() || !workload.unasked.empty()) {
    return false;
  }
  return std::all_of(workload.candidates.begin(), workload.candidates.end(), [](const auto& entry) {
    return entry.second.state == CandidateState::kRejected &&
           entry.second.code == protocol::RejectCode::kNoCapacity;
  });
}

inline bool has_ready(const SourceWorkload& workload) {
  return std::any_of(workload.candidates.begin(), workload.candidates.end(), [](const auto& entry) {
    return entry.second.state == CandidateState::kReady;
  });
}

// Every target asked this round has answered (READY or REJECT).
inline bool all_answered(const SourceWorkload& workload) {
  return std::none_of(
      workload.candidates.begin(), workload.candidates.end(),
      [](const auto& entry) { return entry.second.state == CandidateState::kSent; });
}

inline bool all_rejected(const SourceWorkload& workload) {
  return std::all_of(workload.candidates.begin(), workload.candidates.end(), [](const auto& entry) {
    return entry.second.state == CandidateState::kRejected;
  });
}

// A target refused this round because a sibling copy runs there.
inline bool lost_to_sibling(const SourceWorkload& workload) {
  return std::any_of(workload.candidates.begin(), workload.candidates.end(), [](const auto& entry) {
    return entry.second.code == protocol::RejectCode::kHoldsAnotherCopy;
  });
}

// What a READY costs in preemption, cheapest first: room held now, then
// the fewest victims, then the lowest priority among them.
struct Cost {
  uint32_t victims = 0;
  int32_t priority = 0;
  auto operator<=>(const Cost&) const = default;
};
inline Cost cost_of(const CandidateProgress& progress) {
  return progress.victims == 0 ? Cost{} : Cost{progress.victims, progress.victim_priority};
}

// Whether `record` has used up its budget of disruptions (or, if not
// `disruption`, of restarts): its count is past the spec's bound.
inline bool past_budget(const store::WorkloadRecord& record, bool disruption) {
  int32_t budget = disruption ? record.spec.max_disruptions : record.spec.max_restarts;
  return budget >= 0 && (disruption ? record.disruptions : record.restarts) > budget;
}

// Whether the message being handled, sealed at `order`, was sealed by
// `from` before a STATUS about `workload` we already took from it:
// envelopes can be overtaken (a redial, parallel checks), and such a
// snapshot is older news.
inline bool overtaken_by_status(const SourceWorkload& workload, const std::string& from,
                                const Context::EnvelopeOrder& order) {
  return workload.last_status_from == from && order.precedes(workload.last_status_order);
}

// The remote winner whose silence the workload waits on (worker-lost
// handling: DueIndex files it by that winner), or null. `self_id`: ours.
inline const std::string* watched_winner(const SourceWorkload& workload,
                                         const std::string& self_id) {
  const store::WorkloadRecord& record = workload.record;
  if (is_group(workload) || record.deleting || workload.waiting_ticket ||
      record.phase == model::Phase::kPending || record.winner.empty() || record.winner == self_id ||
      model::is_finished(record.phase)) {
    return nullptr;
  }
  return &record.winner;
}

// Nothing for the timers to do until the workload changes (persist), a
// CANCEL is owed (cancel_at) or a slot is its turn (admit_waiting), each
// of which wakes it.
inline bool is_quiet(const SourceWorkload& workload) {
  const store::WorkloadRecord& record = workload.record;
  if (record.deleting) return false;
  if (is_group(workload)) return true;  // its copies do the work; a delete wakes it
  if (!workload.cancels.empty()) return false;
  // Finished, waiting for a slot (admit_waiting starts its round, and
  // persist wakes it then), or parked (wake_parked or persist wakes it).
  return model::is_finished(record.phase) || workload.waiting_ticket != 0 ||
         workload.parked_until != TimePoint{};
}

}  // namespace shoal::core::source
