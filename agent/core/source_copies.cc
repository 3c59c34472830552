// The source role, the winner's copy: its STATUS mirrored into the
// workload, restarts, worker-lost handling and adoption, reconciliation
// (DIGEST renews leases, HOLDINGS answers), and the role's timers.
#include <algorithm>
#include <set>

#include "agent/core/source_role.h"

namespace shoal::core {

void SourceRole::tick(TimePoint now, bool local_room_freed) {
  due_.start_tick();
  if (local_room_freed) {
    // Room freed in our own cluster: pending work that fits tries again now.
    for (auto it = room_waiters_.begin(); it != room_waiters_.end();) {
      SourceWorkload* found = book_.find(*it);
      if (!found || found->record.phase != model::Phase::kPending) {
        it = room_waiters_.erase(it);
        continue;
      }
      ++it;
      SourceWorkload& workload = *found;
      const auto& spec = workload.record.spec;
      if (is_group(workload)) continue;
      auto own = cluster_.capacity_for(spec.namespace_name, spec.queue);
      if (own && own->largest_free_node.fits(spec.resources) && own->free.fits(spec.total())) {
        workload.next_round_at = std::min(workload.next_round_at, now);
      }
    }
  }
  wake_parked(now);
  drive_source_workloads(now);
  // After the due times above: a DIGEST only moves them later, so they stay
  // lower bounds. Only when one may be due: the plan is a lower bound of
  // every DIGEST's due time, and the issuers only ever grow, so a new one
  // changes their count (each pass looked up every issuer twice).
  if (now >= next_digest_due_ || invitations_.issuers().size() != digest_issuers_seen_) {
    send_digests(now);
  }
}

TimePoint SourceRole::next_deadline() {
  TimePoint next = due_.next_deadline();
  if (!parked_.empty()) next = std::min(next, parked_.begin()->first);
  // An issuer not yet in the digests' plan: its first DIGEST is due now.
  if (invitations_.issuers().size() != digest_issuers_seen_) return TimePoint::min();
  return std::min(next, next_digest_due_);
}

void SourceRole::greet_target(const std::string& target) {
  targets_.digest_sent(target, TimePoint{});
  // Its copies' leases count as unrenewed from now: worker-lost handling
  // of them may come due earlier (worker_lost_at).
  due_.touch_watching(target);
  if (invitations_.issuers().count(target)) next_digest_due_ = TimePoint::min();
}

void SourceRole::heard_from(const std::string& peer, Duration silence) {
  // Silent for less, it was renewable all along, so in the plan already.
  if (may_renew_after(silence)) return;
  // Renewable again: an APPROVE it is owed may be re-sent now (own_due_at).
  due_.touch_watching(peer);
  if (!invitations_.issuers().count(peer)) return;
  TimePoint last_sent = targets_.last_digest_sent(peer);
  next_digest_due_ = std::min(next_digest_due_, last_sent + digest_interval());
}

const std::string* SourceRole::watched_winner(const SourceWorkload& workload) const {
  const store::WorkloadRecord& record = workload.record;
  if (is_group(workload) || record.deleting || workload.waiting_ticket ||
      record.phase == model::Phase::kPending || record.winner.empty() || record.winner == self_id_ ||
      model::is_finished(record.phase)) {
    return nullptr;
  }
  return &record.winner;
}

TimePoint SourceRole::worker_lost_at(const std::string& winner) const {
  // Silent long enough, and (fencing) renewals stopped lease + skew ago.
  TimePoint silent_enough = clock_.now() - silent_for(winner) + config_.worker_lost_timeout;
  TimePoint fenced = TimePoint::min();
  if (config_.lease.count() > 0) {
    TimePoint last_renewal = targets_.last_digest_sent(winner);
    fenced = last_renewal + config_.lease + config_.max_clock_skew;
  }
  return std::max(silent_enough, fenced);
}

// Mirrors drive_source_workload: each time here is one at which that
// function acts (the simulation checks that a tick leaves no deadline due).
TimePoint SourceRole::own_due_at(const SourceWorkload& workload, ResendBound bound) const {
  const store::WorkloadRecord& record = workload.record;
  TimePoint now = clock_.now();
  auto resend_at = [&](const std::string& peer_id, TimePoint last_sent, int resends) {
    return bound == ResendBound::kLatest ? context_.latest_resend_at(peer_id, last_sent, resends)
                                         : context_.resend_at(peer_id, last_sent, resends);
  };
  if (is_group(workload)) {
    bool last_copy_gone = book_.copy_uids(record.uid).empty();
    return record.deleting && last_copy_gone ? now : TimePoint::max();
  }
  TimePoint due = TimePoint::max();
  if (record.deleting) {
    if (workload.deletes.empty()) return now;
    for (const auto& [peer_id, pending] : workload.deletes) {
      due = std::min(due, resend_at(peer_id, pending.last_sent, 0));
      if (pending.give_up_at) due = std::min(due, *pending.give_up_at);
    }
    return due;
  }
  for (const auto& [peer_id, cancel] : workload.cancels) {
    due = std::min({due, cancel.give_up_at, resend_at(peer_id, cancel.last_sent, cancel.resends)});
  }
  if (workload.waiting_ticket) return due;  // for a slot (admit_waiting), not a time
  if (record.winner.empty() && record.spec.placement.ready_window.count() == 0 &&
      workload.first_ready_at != TimePoint{} && has_ready(workload)) {
    // READYs wait for the first-ranked target (waits_for_preferred), no longer.
    due = std::min(due, waits_for_preferred(workload, now) ? hold_until(workload) : now);
  }
  if (record.phase == model::Phase::kPending) {
    return std::min(due, std::max(workload.next_round_at, record.restart_at));
  }
  // (Worker lost: worker_lost_at, for the winner watched_winner names.)
  if (record.phase != model::Phase::kPlacing) return due;
  if (!record.winner.empty()) {
    if (!may_renew_lease(record.winner)) return due;  // until we hear from it (an input)
    return std::min(due,
                    resend_at(record.winner, workload.last_approve_sent, workload.approve_resends));
  }
  const model::PlacementSpec& placement = record.spec.placement;
  if (placement.ready_window.count() > 0 &&
      std::any_of(workload.candidates.begin(), workload.candidates.end(),
                  [](const auto& entry) { return entry.second.state == CandidateState::kReady; })) {
    due = std::min(due, workload.round_started + placement.ready_window);
  }

  if (!workload.untried.empty()) {
    due = std::min(due, workload.wave_started + placement.round_timeout);
  } else if (workload.candidates.empty()) {
    return now;
  } else {
    due = std::min(due, workload.wave_started + config_.reservation_ttl);
  }
  for (const auto& [peer_id, progress] : workload.candidates) {
    if (progress.state == CandidateState::kSent) {
      due = std::min(due, resend_at(peer_id, progress.last_sent, progress.resends));
    }
  }
  return due;
}

bool SourceRole::lost(const std::string& peer_id) const {
  return silent_for(peer_id) >= config_.worker_lost_timeout;
}

bool SourceRole::may_renew_lease(const std::string& peer_id) const {
  return may_renew_after(silent_for(peer_id));
}

bool SourceRole::may_renew_after(Duration silence) const {
  // Stop once the target has been silent so long that worker-lost handling
  // will need its copies stopped: then its lease has ended lease + skew
  // before we place them again.
  return config_.lease.count() == 0 ||
         silence < config_.worker_lost_timeout - config_.lease - config_.max_clock_skew;
}

void SourceRole::adopt(SourceWorkload& workload, const std::string& target, uint64_t copy_epoch) {
  record_event(workload.record.uid,
               "the copy at " + cluster_name_of(target) +
                   (copy_epoch ? " (epoch " + std::to_string(copy_epoch) + ")" : std::string()) +
                   " still runs and nothing replaced it: adopting it");
  choose_winner(workload, target, "re-adopted");
}

void SourceRole::requeue_lost(SourceWorkload& workload, const std::string& why) {
  store::WorkloadRecord& record = workload.record;
  if (!record.winner.empty()) record.lost_copies.push_back({record.winner, record.epoch, false});
  record.disruptions += 1;
  record_event(record.uid, why + "; placing it again under a new epoch");
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
  Duration wait = backoff(count - 1);
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
  record_event(record.uid, std::string(disrupted ? "disruption " : "restart ") + std::to_string(count) +
                               " in " + format_duration(wait) + why);
  record.reason = (disrupted ? "placing again after: " : "restarting after: ") + record.reason;
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
  record_event(record.uid, "the copy at " + cluster_name_of(from) + " (epoch " +
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
  record.cluster = cluster_name_of(from);
  take_copy_status(workload, message);
}

void SourceRole::take_copy_status(SourceWorkload& workload,
                                  const protocol::WorkloadStatus& message) {
  store::WorkloadRecord& record = workload.record;
  model::Phase old_phase = record.phase;
  record.phase = message.phase;
  record.nodes = message.nodes;
  record.started_at_ms = message.started_at_ms;
  record.finished_at_ms = message.finished_at_ms;
  record.exit_code = message.exit_code;
  record.reason = message.message;
  record.updated_at = clock_.now();
  persist(record);
  if (old_phase == record.phase) return;
  record_event(record.uid, std::string(model::phase_name(record.phase)) + " at " + record.cluster +
                               (message.message.empty() ? "" : ": " + message.message));
  if (record.phase == model::Phase::kFailed) on_copy_failed(workload, message.condition);
}

void SourceRole::on_status(const std::string& from, const protocol::WorkloadStatus& message) {
  // Acknowledge whatever we heard so the target stops repeating it.
  send(from, protocol::StatusAck{message.uid, message.epoch, message.generation});
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
    record_event(record.uid, "the copy at " + cluster_name_of(from) + " (epoch " +
                                 std::to_string(message.epoch) + ") given up as lost had " +
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
  std::set<std::string> held;
  for (const auto& copy : message.copies) {
    bool running = copy.phase == model::Phase::kBound || copy.phase == model::Phase::kRunning;
    SourceWorkload* workload = find_source_workload(copy.uid);
    if (!workload) {
      if (running) send(from, protocol::Delete{copy.uid, copy.epoch});  // not ours any more
      continue;
    }
    const store::WorkloadRecord& record = workload->record;
    if (record.winner == from) {
      if (copy.epoch == record.epoch) held.insert(copy.uid);
      continue;  // its copy, or one being adopted (the APPROVE re-epochs it)
    }
    if (!running || record.deleting) continue;
    if (record.winner.empty() && !model::is_finished(record.phase) && copy.epoch <= record.epoch &&
        may_place_at(record, from)) {
      adopt(*workload, from, copy.epoch);
    } else {
      record_event(record.uid, "removing a stale copy at " + cluster_name_of(from) + " (epoch " +
                                   std::to_string(copy.epoch) + ")");
      send(from, protocol::Delete{copy.uid, copy.epoch});
    }
  }
  // A copy we count as bound or running there, which the target does not
  // hold — unless this snapshot was sealed before a STATUS we already took
  // from it (overtaken on the way: it may predate the copy's binding).
  for (auto& [uid, workload] : book_.entries()) {
    const store::WorkloadRecord& record = workload.record;
    if (record.winner != from || held.count(uid) || record.deleting) continue;
    if (record.phase != model::Phase::kBound && record.phase != model::Phase::kRunning) continue;
    if (workload.last_status_from == from &&
        context_.envelope_order().precedes(workload.last_status_order)) {
      continue;
    }
    requeue_lost(workload, "LostAtTarget: " + record.cluster + " no longer holds epoch " +
                               std::to_string(record.epoch));
  }
}

Duration SourceRole::digest_interval() const {
  Duration interval = config_.gc_interval;
  if (config_.lease.count() > 0) interval = std::min(interval, config_.lease / 4);
  return interval;
}

void SourceRole::send_digests(TimePoint now) {
  Duration interval = digest_interval();
  next_digest_due_ = TimePoint::max();
  digest_issuers_seen_ = invitations_.issuers().size();
  for (const auto& [id, invitations] : invitations_.issuers()) {
    // Renewing a lease tells the target "I still see you". One that may
    // not be renewed waits until we hear from it (heard_from).
    if (!may_renew_lease(id)) continue;
    TimePoint last_sent = targets_.last_digest_sent(id);
    if (now - last_sent < interval) {
      next_digest_due_ = std::min(next_digest_due_, last_sent + interval);
      continue;
    }
    protocol::Digest digest;
    digest.lease_ms = static_cast<uint64_t>(config_.lease.count());
    for (const auto& [uid, workload] : book_.entries()) {
      const store::WorkloadRecord& record = workload.record;
      if (record.winner == id && !model::is_finished(record.phase) && !record.deleting) {
        digest.copies.push_back({uid, record.epoch, record.spec.priority});
      }
    }
    targets_.digest_sent(id, now);
    next_digest_due_ = std::min(next_digest_due_, now + interval);
    send(id, std::move(digest));
  }
}

void SourceRole::silences_restarted() {
  due_.touch_all_watching();
  // A target silent too long to renew may be renewable again.
  next_digest_due_ = TimePoint::min();
}

void SourceRole::drive_source_workloads(TimePoint now) {
  // Only the awake whose time has come, in uid order: a finished workload
  // with nothing left to retry or delete sleeps until something wakes it,
  // so an idle agent does not walk its history on every tick, and one not
  // yet due is not visited either (DueIndex).
  DueIndex::Visits visits = due_.due(now);
  std::vector<std::string> deleted;
  for (const std::string& uid : visits.uids) {
    SourceWorkload* found = book_.find(uid);
    if (!found) {
      due_.sleep(uid);
      continue;
    }
    SourceWorkload& workload = *found;
    size_t deleted_before = deleted.size();
    drive_source_workload(uid, workload, now, deleted);
    if (is_quiet(workload)) {
      due_.sleep(uid);
    } else if (deleted.size() == deleted_before) {
      due_.refile(uid);
    }
  }
  for (const auto& uid : deleted) forget_workload(uid);
  due_.finish_visits(visits);
}

std::optional<TimePoint> SourceRole::own_due(const std::string& uid, ResendBound bound) const {
  const SourceWorkload* found = book_.find(uid);
  if (!found) return std::nullopt;
  return own_due_at(*found, bound);
}

const std::string* SourceRole::watched(const std::string& uid) const {
  const SourceWorkload* found = book_.find(uid);
  return found ? watched_winner(*found) : nullptr;
}

bool SourceRole::decide_after_preferred_wait(SourceWorkload& workload, TimePoint now) {
  const store::WorkloadRecord& record = workload.record;
  // first_ready_at: a READY came for this round and was not decided on yet
  // (a winner whose copy ended leaves its candidate READY behind).
  if (record.spec.placement.ready_window.count() > 0 || !record.winner.empty() ||
      workload.first_ready_at == TimePoint{} || waits_for_preferred(workload, now) || !has_ready(workload)) {
    return false;
  }
  auto preferred = workload.candidates.find(workload.preferred);
  bool answered = preferred == workload.candidates.end() || preferred->second.state == CandidateState::kReady;
  choose_best_ready(workload,
                    answered ? "first READY of epoch " + std::to_string(record.epoch)
                             : "first-ranked " + cluster_name_of(workload.preferred) +
                                   " not READY within preferredWait " + format_duration(config_.preferred_wait),
                    /*spread_ties=*/true);
  return true;
}

bool SourceRole::has_ready(const SourceWorkload& workload) {
  return std::any_of(workload.candidates.begin(), workload.candidates.end(),
                     [](const auto& entry) { return entry.second.state == CandidateState::kReady; });
}

bool SourceRole::is_quiet(const SourceWorkload& workload) {
  const store::WorkloadRecord& record = workload.record;
  if (record.deleting) return false;
  if (is_group(workload)) return true;  // its copies do the work; a delete wakes it
  if (!workload.cancels.empty()) return false;
  // Finished, waiting for a slot (admit_waiting starts its round, and
  // persist wakes it then), or parked (wake_parked or persist wakes it).
  return model::is_finished(record.phase) || workload.waiting_ticket != 0 ||
         workload.parked_until != TimePoint{};
}

void SourceRole::drive_source_workload(const std::string& uid, SourceWorkload& workload,
                                       TimePoint now, std::vector<std::string>& deleted) {
  store::WorkloadRecord& record = workload.record;
  if (is_group(workload)) {
    // Its copies do the work; it goes once the last of them has been deleted.
    if (record.deleting && book_.copy_uids(uid).empty()) deleted.push_back(uid);
    return;
  }
  if (record.deleting) {
    if (drive_delete(workload, now)) deleted.push_back(uid);
    return;
  }
  // Cancels are retried until RELEASED or until the reservation must have expired.
  for (auto it = workload.cancels.begin(); it != workload.cancels.end();) {
    if (now >= it->second.give_up_at) {
      it = workload.cancels.erase(it);
      continue;
    }
    if (now >= context_.resend_at(it->first, it->second.last_sent, it->second.resends)) {
      it->second.last_sent = now;
      it->second.resends += 1;
      send(it->first, protocol::Cancel{uid, it->second.epoch});
    }
    ++it;
  }
  if (workload.waiting_ticket) return;  // for a slot: admit_waiting() starts its round
  if (record.phase == model::Phase::kPending) {
    if (decide_after_preferred_wait(workload, now)) return;
    if (now >= workload.next_round_at && now >= record.restart_at && !renew_queued(workload)) {
      start_round(workload);
    }
    return;
  }
  if (!record.winner.empty() && record.winner != self_id_ && !model::is_finished(record.phase) &&
      lost(record.winner)) {
    // Fencing arithmetic (docs/lifecycle.md): renewals to a silent winner
    // stopped at least lease + skew ago, so its copy has stopped by now.
    TimePoint last_renewal = targets_.last_digest_sent(record.winner);
    if (config_.lease.count() == 0 ||
        now - last_renewal >= config_.lease + config_.max_clock_skew) {
      requeue_lost(workload, "worker lost: " + record.cluster + " silent for " +
                                 format_duration(silent_for(record.winner)));
      return;
    }
  }
  if (record.phase != model::Phase::kPlacing) return;
  if (!record.winner.empty()) {
    // An APPROVE that binds renews the target's lease: like a DIGEST, it
    // is not sent to a target silent past the renewal window.
    if (now >= context_.resend_at(record.winner, workload.last_approve_sent,
                                  workload.approve_resends) &&
        may_renew_lease(record.winner)) {
      workload.last_approve_sent = now;
      workload.approve_resends += 1;
      send(record.winner, protocol::Approve{uid, record.epoch});
    }
    return;
  }
  if (record.spec.placement.ready_window.count() > 0 &&
      now - workload.round_started >= record.spec.placement.ready_window &&
      std::any_of(workload.candidates.begin(), workload.candidates.end(),
                  [](const auto& entry) { return entry.second.state == CandidateState::kReady; })) {
    choose_best_ready(
        workload, "readyWindow " + format_duration(record.spec.placement.ready_window) + " closed");
    return;
  }
  if (decide_after_preferred_wait(workload, now)) return;
  if (!workload.untried.empty()) {
    if (now - workload.wave_started >= record.spec.placement.round_timeout)
      ask_next_batch(workload);
  } else if (workload.candidates.empty() ||
             now - workload.wave_started >= config_.reservation_ttl) {
    // A restart left the round without its candidates, or nobody answered in time.
    start_round(workload);
    return;
  }
  for (auto& [peer_id, progress] : workload.candidates) {
    if (progress.state == CandidateState::kSent &&
        now >= context_.resend_at(peer_id, progress.last_sent, progress.resends)) {
      progress.last_sent = now;
      progress.resends += 1;
      send(peer_id, protocol::Candidate{uid, record.epoch, record.spec});
    }
  }
}

}  // namespace shoal::core
