// The source role, the winner's copy: its STATUS mirrored into the
// workload, restarts, worker-lost handling and adoption, reconciliation
// (HOLDINGS, the answer to our DIGEST, which SourceLeases sends). The
// role's timers are in timers.cc.
#include <algorithm>
#include <set>

#include "agent/core/source/role.h"

namespace shoal::core::source {

void SourceRole::greet_target(const std::string& target) {
  targets_.greeted(target);
  // Its copies' leases count as unrenewed from now: worker-lost handling
  // of them may come due earlier (worker_lost_at).
  due_.touch_watching(target);
  if (invitations_.issuers().count(target)) leases_.due_now();
}

TimePoint SourceRole::lose_target(const std::string& target) {
  targets_.forget_capacity(target);
  due_.touch_watching(target);
  // Deleting workloads are not watched (watched_winner): those owing it a
  // DELETE are found by a walk, once, for an operator's request.
  for (const auto& [uid, workload] : book_.entries()) {
    if (!workload.deletes.count(target)) continue;
    due_.wake(uid);
    due_.touch(uid);
  }
  return std::max(clock_.now(), leases_.let_go_at(target).value_or(TimePoint::min()));
}

void SourceRole::heard_from(const std::string& peer, Duration silence) {
  // Silent for less, it was renewable all along, so in the plan already.
  if (leases_.may_renew_after(silence)) return;
  // Renewable again: an APPROVE it is owed may be re-sent now (own_due_at).
  due_.touch_watching(peer);
  if (!invitations_.issuers().count(peer)) return;
  TimePoint last_sent = targets_.last_digest_sent(peer);
  leases_.due_by(last_sent + leases_.digest_interval());
}

void SourceRole::adopt(SourceWorkload& workload, const std::string& target, uint64_t copy_epoch) {
  context_.record_event(
      workload.record.uid,
      "the copy at " + context_.cluster_name_of(target) +
          (copy_epoch ? " (epoch " + std::to_string(copy_epoch) + ")" : std::string()) +
          " still runs and nothing replaced it: adopting it");
  choose_winner(workload, target, "re-adopted");
}

void SourceRole::fail_past_budget(SourceWorkload& workload, bool disruption, const std::string& last) {
  store::WorkloadRecord& record = workload.record;
  record.reason = disruption ? "TooManyDisruptions: " + std::to_string(record.disruptions) +
                                   " ends not its own, more than its maxDisruptions (" +
                                   std::to_string(record.spec.max_disruptions) + "); the last: " + last
                             : "TooManyRestarts: " + std::to_string(record.restarts) +
                                   " restarts, more than its maxRestarts (" +
                                   std::to_string(record.spec.max_restarts) + "); the last: " + last;
  record.phase = model::Phase::kFailed;
  // No copy is its any more: one that turns up again is removed, never
  // taken as its winner's (a lost copy's late end is kept in lost_copies).
  record.winner.clear();
  record.cluster.clear();
  if (record.finished_at_ms == 0) record.finished_at_ms = to_millis(clock_.now());
  record.updated_at = clock_.now();
  persist(record);
  context_.record_event(record.uid, "Failed, not placed again: " + record.reason);
}

void SourceRole::requeue_lost(SourceWorkload& workload, const std::string& why) {
  store::WorkloadRecord& record = workload.record;
  if (!record.winner.empty()) record.lost_copies.push_back({record.winner, record.epoch, false});
  record.disruptions += 1;
  if (past_budget(record, /*disruption=*/true)) {
    fail_past_budget(workload, true, why);
    return;
  }
  context_.record_event(record.uid, why + "; placing it again under a new epoch");
  workload.pending_attempts = 0;
  start_round(workload);  // persists the new round (or Pending), disruptions included
  if (record.phase == model::Phase::kPending) {
    record.reason = why + "; " + record.reason;
    persist(record);
  }
}

namespace {

// Ends its target chose (its operator, a policy, the cluster's scheduler, a
// failed node, or a start it kept waiting too long): the next rounds keep
// away from it for a while. A copy
// fenced off, or lost across the target's restart, says nothing against it.
bool ended_by_target(protocol::CopyCondition condition) {
  return condition == protocol::CopyCondition::kDeletedAtTarget ||
         condition == protocol::CopyCondition::kRevoked ||
         condition == protocol::CopyCondition::kEvicted ||
         condition == protocol::CopyCondition::kNodeFailed ||
         condition == protocol::CopyCondition::kPreempted ||
         condition == protocol::CopyCondition::kStartTimeout;
}

}  // namespace

void SourceRole::on_copy_failed(SourceWorkload& workload, protocol::CopyCondition condition) {
  store::WorkloadRecord& record = workload.record;
  // An end its job did not cause (an eviction or delete at the target, its
  // node failed, lost on the target's restart, fenced off) is placed again
  // whatever restartPolicy says, counted as a disruption, and, when the
  // target chose it, not at that target for a while. A copy the cluster
  // could not launch is placed again too (a restart). The job's own
  // failure, an exit code, follows restartPolicy.
  bool disrupted = protocol::is_disruption(condition);
  bool never_started = condition == protocol::CopyCondition::kStartFailed;
  if (record.deleting || (!disrupted && !never_started &&
                          record.spec.restart_policy != model::RestartPolicy::kOnFailure)) {
    return;
  }
  int32_t& count = disrupted ? record.disruptions : record.restarts;
  count += 1;
  if (past_budget(record, disrupted)) {
    std::string last = std::string(protocol::kCopyConditionNames[static_cast<int>(condition)]) + " at " +
                       record.cluster + (record.reason.empty() ? "" : ": " + record.reason);
    fail_past_budget(workload, disrupted, last);
    return;
  }
  Duration wait = backoff(count - 1, config_);
  std::string why;
  if (disrupted) {
    why = " (" + std::string(protocol::kCopyConditionNames[static_cast<int>(condition)]) + " at " +
          record.cluster + ": not its own failure";
    if (ended_by_target(condition) && !record.winner.empty()) {
      workload.avoid_until[record.winner] = clock_.now() + kAvoidDisruptingTarget;
      why += "; not placed there again for " + format_duration(kAvoidDisruptingTarget);
    }
    why += ")";
  } else {
    why = never_started ? " (its copy could not be started)" : " (restartPolicy OnFailure)";
  }
  context_.record_event(record.uid, std::string(disrupted ? "disruption " : "restart ") +
                                        std::to_string(count) + " in " + format_duration(wait) +
                                        why);
  record.reason = (disrupted ? "placing again after: " : "restarting after: ") + record.reason;
  // Its round is over. What its targets answered in it must decide nothing
  // now: a READY a target's queue serves late, or the first-ranked
  // target's REJECT, would otherwise approve the failed winner again at
  // this epoch, past the quota line the workload left when it failed. The
  // next round asks afresh under a new epoch; a late answer of this one is
  // cancelled as a stranger's.
  workload.candidates.clear();
  workload.untried.clear();
  workload.first_ready_at = TimePoint{};
  record.phase = model::Phase::kPending;
  record.winner.clear();
  record.cluster.clear();
  record.updated_at = clock_.now();
  persist(record);
  workload.next_round_at = clock_.now() + wait;
  record.restart_at = workload.next_round_at;
  persist(record);
}

void SourceRole::keep_outcome_of_lost_copy(SourceWorkload& workload, const std::string& from,
                                           const protocol::WorkloadStatus& message) {
  store::WorkloadRecord& record = workload.record;
  std::erase(record.lost_copies, store::LostCopy{from, message.epoch, false});
  context_.record_event(record.uid, "the copy at " + context_.cluster_name_of(from) + " (epoch " +
                                        std::to_string(message.epoch) + ") given up as lost had " +
                                        std::string(model::phase_name(message.phase)) +
                                        " and nothing replaced it: keeping its outcome");
  for (auto& [peer_id, progress] : workload.candidates) {
    if (may_hold_something(progress)) cancel_at(workload, peer_id, record.epoch);
  }
  workload.candidates.clear();
  workload.untried.clear();
  // The epoch stays the newest this workload used, so a later round never
  // reuses one that a target may still hold.
  record.winner = from;
  record.cluster = context_.cluster_name_of(from);
  take_copy_status(workload, message);
}

void SourceRole::take_copy_status(SourceWorkload& workload,
                                  const protocol::WorkloadStatus& message) {
  store::WorkloadRecord& record = workload.record;
  model::Phase old_phase = record.phase;
  std::string old_reason = std::move(record.reason);
  record.phase = message.phase;
  record.nodes = message.nodes;
  record.started_at_ms = message.started_at_ms;
  record.finished_at_ms = message.finished_at_ms;
  record.exit_code = message.exit_code;
  record.reason = message.message;
  record.updated_at = clock_.now();
  persist(record);
  if (old_phase == record.phase) {
    // A bound copy's target says why it has not started (or no longer).
    if (record.phase == model::Phase::kBound && old_reason != record.reason) {
      context_.record_event(
          record.uid, "at " + record.cluster + ": " +
                          (record.reason.empty() ? "no longer waits" : "waits: " + record.reason));
    }
    return;
  }
  context_.record_event(record.uid, std::string(model::phase_name(record.phase)) + " at " +
                                        record.cluster +
                                        (message.message.empty() ? "" : ": " + message.message));
  if (record.phase == model::Phase::kFailed) on_copy_failed(workload, message.condition);
}

void SourceRole::on_status(const std::string& from, const protocol::WorkloadStatus& message) {
  // Acknowledge whatever we heard so the target stops repeating it: soon,
  // not at once, so that the acknowledgements of a stream of reports share
  // envelopes (the target repeats a report only after retryInterval).
  context_.send_later(from, protocol::StatusAck{message.uid, message.epoch, message.generation},
                      context_.lazy_delay());
  SourceWorkload* workload = find_source_workload(message.uid);
  if (!workload) return;
  store::WorkloadRecord& record = workload->record;
  auto lost = std::find(record.lost_copies.begin(), record.lost_copies.end(),
                        store::LostCopy{from, message.epoch, false});
  if (lost != record.lost_copies.end() && model::is_finished(message.phase)) {
    // The outcome of a copy given up as lost, while no other copy runs (one
    // placed since may have failed or been fenced off): it ran within its
    // lease, so its result is the workload's. Placing it again would run
    // the work a second time.
    if (!record.deleting &&
        (record.phase == model::Phase::kPending || record.phase == model::Phase::kPlacing) &&
        (record.winner.empty() || record.winner == from)) {
      keep_outcome_of_lost_copy(*workload, from, message);
      return;
    }
    // Too late to be the workload's. A success still keeps the copy's
    // siblings away from that cluster (sibling_winners); anything else
    // frees it.
    if (message.phase == model::Phase::kSucceeded && !record.parent.empty()) {
      lost->succeeded = true;
    } else {
      record.lost_copies.erase(lost);
    }
    context_.record_event(record.uid, "the copy at " + context_.cluster_name_of(from) + " (epoch " +
                                          std::to_string(message.epoch) +
                                          ") given up as lost had " +
                                          std::string(model::phase_name(message.phase)) +
                                          "; another copy had replaced it");
    persist(record);
  }
  if (record.winner != from || record.epoch != message.epoch ||
      message.generation <= record.status_generation || record.deleting) {
    return;  // another cluster, an older epoch, an older report, or on its way out
  }
  if (message.phase == model::Phase::kPending || message.phase == model::Phase::kPlacing) return;
  record.status_generation = message.generation;
  workload->last_status_from = from;
  workload->last_status_order = context_.envelope_order();
  take_copy_status(*workload, message);
}

void SourceRole::on_holdings(const std::string& from, const protocol::Holdings& message) {
  // The target's side of reconciliation: the source owns each workload, so
  // it decides what every mismatch means. Never two running copies of one
  // workload: a copy is kept only if it is (or becomes) the epoch's winner.
  // It answers a DIGEST, so the target knows our lease (SourceLeases::send_binding).
  targets_.heard_holdings(from);
  std::set<std::string> held;
  for (const auto& copy : message.copies) {
    bool running = copy.phase == model::Phase::kBound || copy.phase == model::Phase::kRunning;
    SourceWorkload* workload = find_source_workload(copy.uid);
    if (!workload) {
      if (running)
        context_.send(from, protocol::Delete{copy.uid, copy.epoch});  // not ours any more
      continue;
    }
    const store::WorkloadRecord& record = workload->record;
    if (record.winner == from) {
      if (copy.epoch == record.epoch) held.insert(copy.uid);
      continue;  // its copy, or one being adopted (the APPROVE re-epochs it)
    }
    if (!running || record.deleting) continue;
    // A snapshot sealed before a STATUS we took from this target about this
    // workload is older news: that STATUS may have said the copy ended.
    if (overtaken_by_status(*workload, from, context_.envelope_order())) continue;
    if (record.winner.empty() && !model::is_finished(record.phase) && copy.epoch <= record.epoch &&
        may_place_at(record, from)) {
      adopt(*workload, from, copy.epoch);
    } else {
      context_.record_event(record.uid, "removing a stale copy at " +
                                            context_.cluster_name_of(from) + " (epoch " +
                                            std::to_string(copy.epoch) + ")");
      context_.send(from, protocol::Delete{copy.uid, copy.epoch});
    }
  }
  // A copy we count as bound or running there, which the target does not
  // hold — unless this snapshot was sealed before a STATUS we already took
  // from it (overtaken on the way: it may predate the copy's binding).
  for (auto& [uid, workload] : book_.entries()) {
    const store::WorkloadRecord& record = workload.record;
    if (record.winner != from || held.count(uid) || record.deleting) continue;
    if (record.phase != model::Phase::kBound && record.phase != model::Phase::kRunning) continue;
    if (overtaken_by_status(workload, from, context_.envelope_order())) continue;
    requeue_lost(workload, "LostAtTarget: " + record.cluster + " no longer holds epoch " +
                               std::to_string(record.epoch));
  }
}

void SourceRole::silences_restarted() {
  due_.touch_all_watching();
  // A target silent too long to renew may be renewable again.
  leases_.due_now();
}

}  // namespace shoal::core::source
