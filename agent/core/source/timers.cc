// The source role's timers: the tick, what each workload is due for and
// when (own_due_at, the winner it watches for worker-lost handling), and
// driving each awake workload through its due work (a round, a resend, a
// decision after the preferred wait, a delete).
#include <algorithm>
#include <set>

#include "agent/core/source/role.h"

namespace shoal::core::source {

void SourceRole::tick(TimePoint now, bool local_room_freed) {
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
        due_.wake(workload.record.uid);
        due_.touch(workload.record.uid);  // due now: start_tick() files it so
      }
    }
  }
  due_.start_tick();
  parked_.wake_due(book_, now);
  drive_source_workloads(now);
  // After the due times above: a DIGEST only moves them later, so they stay
  // lower bounds. Only when one may be due: the plan is a lower bound of
  // every DIGEST's due time, and the issuers only ever grow, so a new one
  // changes their count (each pass looked up every issuer twice).
  if (leases_.pass_due(now, invitations_.issuers().size())) leases_.send_digests(now, invitations_);
}

TimePoint SourceRole::next_deadline() {
  TimePoint next = due_.next_deadline();
  next = std::min(next, parked_.next_wake());
  // An issuer not yet in the digests' plan: its first DIGEST is due now.
  return std::min(next, leases_.next_due(invitations_.issuers().size()));
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
      if (auto let_go_at = leases_.let_go_at(peer_id)) due = std::min(due, *let_go_at);
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
    due = std::min(
        due, waits_for_preferred(workload, now, config_) ? hold_until(workload, config_) : now);
  }
  if (record.phase == model::Phase::kPending) {
    return std::min(due, std::max(workload.next_round_at, record.restart_at));
  }
  // (Worker lost: SourceLeases::worker_lost_at, for the winner watched_winner names.)
  if (record.phase != model::Phase::kPlacing) return due;
  if (!record.winner.empty()) {
    if (!leases_.may_renew(record.winner)) return due;  // until we hear from it (an input)
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
    due = std::min(due, workload.wave_started + wave_timeout(record, config_));
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
  return found ? watched_winner(*found, self_id_) : nullptr;
}

bool SourceRole::decide_after_preferred_wait(SourceWorkload& workload, TimePoint now) {
  const store::WorkloadRecord& record = workload.record;
  // first_ready_at: a READY came for this round and was not decided on yet
  // (a winner whose copy ended leaves its candidate READY behind).
  if (record.spec.placement.ready_window.count() > 0 || !record.winner.empty() ||
      workload.first_ready_at == TimePoint{} || waits_for_preferred(workload, now, config_) ||
      !has_ready(workload)) {
    return false;
  }
  auto preferred = workload.candidates.find(workload.preferred);
  bool answered = preferred == workload.candidates.end() || preferred->second.state == CandidateState::kReady;
  choose_best_ready(workload,
                    answered ? "first READY of epoch " + std::to_string(record.epoch)
                             : "first-ranked " + context_.cluster_name_of(workload.preferred) +
                                   " not READY within preferredWait " +
                                   format_duration(config_.preferred_wait),
                    /*spread_ties=*/true);
  return true;
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
      context_.send(it->first, protocol::Cancel{uid, it->second.epoch});
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
      leases_.lost(record.winner)) {
    // Fencing arithmetic (docs/lifecycle.md): renewals to a silent winner
    // stopped at least lease + skew ago, so its copy has stopped by now.
    if (leases_.renewals_ended(record.winner, now)) {
      requeue_lost(workload, leases_.why_lost(record.winner, record.cluster));
      return;
    }
  }
  if (record.phase != model::Phase::kPlacing) return;
  if (!record.winner.empty()) {
    // An APPROVE that binds renews the target's lease: like a DIGEST, it
    // is not sent to a target silent past the renewal window.
    if (now >= context_.resend_at(record.winner, workload.last_approve_sent,
                                  workload.approve_resends) &&
        leases_.may_renew(record.winner)) {
      workload.last_approve_sent = now;
      workload.approve_resends += 1;
      leases_.send_binding(record.winner, protocol::Approve{uid, record.epoch});
    }
    return;
  }
  if (record.spec.placement.ready_window.count() > 0 &&
      now - workload.round_started >= record.spec.placement.ready_window && has_ready(workload)) {
    choose_best_ready(
        workload, "readyWindow " + format_duration(record.spec.placement.ready_window) + " closed");
    return;
  }
  if (decide_after_preferred_wait(workload, now)) return;
  if (!workload.untried.empty()) {
    if (now - workload.wave_started >= wave_timeout(record, config_)) ask_next_batch(workload);
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
      context_.send(peer_id, protocol::Candidate{uid, record.epoch, record.spec});
    }
  }
}

}  // namespace shoal::core::source
