// The source role, the answers to a round: CAPACITY (what targets
// advertise), READY and REJECT, the winner chosen among the READYs (the
// first-ranked, or the best once it has waited enough; persisted before
// APPROVE leaves, the rest CANCELled), RELEASED and BOUND.
#include <algorithm>
#include <optional>
#include <set>

#include "agent/core/source/role.h"
#include "common/check.h"

namespace shoal::core::source {

void SourceRole::on_capacity(const std::string& from, const protocol::Capacity& message) {
  // What it said BOUND to before this CAPACITY, it now counts itself.
  std::vector<std::string> acknowledged = targets_.advertised(from, message);
  const TargetLedger::Target& peer = *targets_.find(from);
  for (const std::string& uid : acknowledged) {
    SourceWorkload* found = book_.find(uid);
    if (found && found->expected_at == from && found->acknowledged) {
      targets_.expect_at(*found, "");
      found->advertised_by = from;
    }
  }
  // Pending work that this peer now has room for is tried again at once
  // rather than after the backoff. Such work is awake (is_quiet); what waits
  // for a slot of the window is not, and need not be.
  for (auto it = room_waiters_.begin(); it != room_waiters_.end();) {
    const std::string& uid = *it;
    SourceWorkload* found = book_.find(uid);
    if (!found || found->record.phase != model::Phase::kPending) {
      it = room_waiters_.erase(it);
      continue;
    }
    ++it;
    SourceWorkload& workload = *found;
    const store::WorkloadRecord& record = workload.record;
    if (is_group(workload)) continue;
    auto advertised = peer.capacity.find(record.spec.namespace_name);
    if (advertised == peer.capacity.end()) continue;
    auto room = advertised_room(advertised->second, record.spec.queue);
    if (room && room->second.fits(record.spec.resources) && room->first.fits(record.spec.total())) {
      workload.next_round_at = std::min(workload.next_round_at, clock_.now());
      due_.touch(uid);
    }
  }
}

void SourceRole::on_ready(const std::string& from, const protocol::Ready& message) {
  SourceWorkload* workload = find_source_workload(message.uid);
  if (!workload) {
    context_.send(from, protocol::Cancel{message.uid, message.epoch});
    return;
  }
  store::WorkloadRecord& record = workload->record;
  if (message.epoch != record.epoch || model::is_finished(record.phase) || record.deleting) {
    cancel_at(*workload, from, message.epoch);
    return;
  }
  if (!record.winner.empty()) {
    if (record.winner == from) {
      if (record.phase == model::Phase::kPlacing) {
        // (Approved in advance, it answers READY when it offers to preempt
        // or does not know approvals: the APPROVE it needs follows.)
        workload->approved_in_advance = false;
        leases_.send_binding(from, protocol::Approve{record.uid, record.epoch});
      }
    } else {
      cancel_at(*workload, from, message.epoch);  // a READY after the winner: cancel it
    }
    return;
  }
  if (!workload->candidates.count(from)) {
    cancel_at(*workload, from, message.epoch);  // never asked this epoch: not a contender
    return;
  }
  bool served_from_queue = record.phase == model::Phase::kPending;
  if (record.phase != model::Phase::kPlacing && !served_from_queue) {
    cancel_at(*workload, from, message.epoch);
    return;
  }
  if (served_from_queue && beyond_quota(*workload)) {
    // Its round started within the quota; what holds the quota now did not
    // wait for this target's queue. Its next round waits in line.
    cancel_at(*workload, from, message.epoch);
    return;
  }
  if (book_.sibling_winners(record).count(from)) {
    refuse_for_sibling(*workload, from, message.epoch);
    return;
  }
  CandidateProgress& progress = workload->candidates[from];
  if (workload->first_ready_at == TimePoint{}) workload->first_ready_at = clock_.now();
  // A repeated READY (answering a re-sent CANDIDATE) says nothing new: the
  // score is the one the reservation was made with.
  if (progress.state != CandidateState::kReady) progress.score = message.score;
  // The newest word on what it costs: an offer to preempt may turn into
  // room held once room frees there.
  progress.victims = message.victims;
  progress.victim_priority = message.victim_priority;
  progress.state = CandidateState::kReady;
  const model::PlacementSpec& placement = record.spec.placement;
  if (placement.ready_window.count() > 0 && !served_from_queue) {
    // Scoring window: hold the reservations until the window closes, minReady
    // answers are in, or nobody is left to answer; then take the best.
    int readies = 0;
    bool everyone_answered = workload->untried.empty();
    for (const auto& [peer_id, p] : workload->candidates) {
      if (p.state == CandidateState::kReady) ++readies;
      if (p.state == CandidateState::kSent) everyone_answered = false;
    }
    if (placement.min_ready > 0 && readies >= placement.min_ready) {
      choose_best_ready(*workload, std::to_string(readies) + " READY (minReady)");
    } else if (everyone_answered) {
      choose_best_ready(*workload, "every candidate answered");
    }
    return;
  }
  // The first READYs win: those read in the same batch compete by score at
  // its end (decide_readied), and wait up to preferredWait for the round's
  // first-ranked target, so the target that answers fastest does not take
  // everything. (A READY while Pending comes from a target that queued this
  // epoch's candidate and now has room.)
  readied_.insert(record.uid);
}

void SourceRole::refuse_for_sibling(SourceWorkload& workload, const std::string& target,
                                    uint64_t epoch) {
  // Another copy of this workload won there first: one copy per cluster.
  cancel_at(workload, target, epoch);
  on_reject(target, protocol::Reject{workload.record.uid, epoch, "HoldsAnotherCopy",
                                     protocol::RejectCode::kHoldsAnotherCopy});
}

bool SourceRole::decide_readied() {
  if (readied_.empty()) return false;
  std::set<std::string> readied = std::move(readied_);
  readied_.clear();
  for (const std::string& uid : readied) {
    SourceWorkload* found = book_.find(uid);
    if (!found) continue;
    SourceWorkload& workload = *found;
    const store::WorkloadRecord& record = workload.record;
    bool undecided =
        record.winner.empty() && !record.deleting &&
        (record.phase == model::Phase::kPlacing || record.phase == model::Phase::kPending);
    if (!undecided) continue;
    if (record.phase == model::Phase::kPending && beyond_quota(workload)) {
      // Served from targets' queues, each READY within the quota when it
      // was read; another workload of the namespace won in this same batch
      // and took the room. The next round waits in line.
      for (auto& [peer_id, progress] : workload.candidates) {
        if (progress.state != CandidateState::kReady) continue;
        cancel_at(workload, peer_id, record.epoch);
        progress.state = CandidateState::kRejected;
        progress.code = protocol::RejectCode::kOther;
        progress.reason = "QuotaExceeded: cancelled at the source";
      }
      continue;
    }
    // A sibling copy may have won at one of them in this same step.
    std::set<std::string> taken = book_.sibling_winners(record);
    std::vector<std::string> refused;
    int readies = 0;
    for (const auto& [peer_id, progress] : workload.candidates) {
      if (progress.state != CandidateState::kReady) continue;
      if (taken.count(peer_id)) {
        refused.push_back(peer_id);
      } else {
        ++readies;
      }
    }
    uint64_t epoch = record.epoch;
    for (const std::string& peer_id : refused) refuse_for_sibling(workload, peer_id, epoch);
    if (readies == 0 || !record.winner.empty() || record.epoch != epoch) continue;
    // The first-ranked target has not answered READY yet but still may:
    // the timers decide once preferredWait is over (a parked workload is
    // woken for it).
    if (waits_for_preferred(workload, clock_.now(), config_)) {
      parked_.unpark(workload);
      due_.wake(uid);
      due_.touch(uid);
      continue;
    }
    std::string why = "first READY of epoch " + std::to_string(record.epoch);
    if (readies > 1) why += " (" + std::to_string(readies) + " read together)";
    if (record.phase == model::Phase::kPending) why += ", served from its queue";
    choose_best_ready(workload, why, /*spread_ties=*/true);
  }
  return true;
}

void SourceRole::choose_winner(SourceWorkload& workload, const std::string& target,
                               const std::string& why) {
  store::WorkloadRecord& record = workload.record;
  // Exactly once: one winner per epoch, and a new epoch for another.
  SHOAL_CHECK(record.winner.empty() || record.winner == target, "a second winner chosen in one epoch");
  // The winner is in this batch, which commits before the APPROVE below
  // leaves the agent: a restarted source approves the same one.
  record.winner = target;
  record.cluster = context_.cluster_name_of(target);
  record.phase = model::Phase::kPlacing;
  record.reason.clear();
  record.status_generation = 0;  // the winner's copy counts its own generations
  record.updated_at = clock_.now();
  persist(record);
  workload.candidates[target].state = CandidateState::kReady;
  workload.untried.clear();
  workload.last_approve_sent = clock_.now();
  workload.approve_resends = 0;
  workload.first_ready_at = TimePoint{};  // decided: READYs of this round wait no more
  workload.pending_attempts = 0;
  workload.round_started = clock_.now();
  context_.record_event(record.uid, "winner " + record.cluster + " (" + why + ")");
  leases_.send_binding(target, protocol::Approve{record.uid, record.epoch});
  for (auto& [peer_id, progress] : workload.candidates) {
    if (peer_id != target && may_hold_something(progress)) cancel_at(workload, peer_id, record.epoch);
  }
}

namespace {

// FNV-1a: a tie-break that is the same on every build and run.
uint64_t tie_hash(const std::string& uid, const std::string& cluster) {
  uint64_t hash = 1469598103934665603ull;
  for (const std::string* part : {&uid, &cluster}) {
    for (char c : *part) hash = (hash ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    hash = (hash ^ 0xff) * 1099511628211ull;
  }
  return hash;
}

}  // namespace

void SourceRole::choose_best_ready(SourceWorkload& workload, const std::string& why,
                                   bool spread_ties) {
  const std::string* best = nullptr;
  double best_score = 0, best_rank = 0, best_fit = 0;
  std::string best_name;
  uint64_t best_hash = 0;
  std::set<std::string> taken = book_.sibling_winners(workload.record);
  // Without a readyWindow the engine's own pick wins whenever it is READY:
  // the live decision is the one `place --live` shows. The rest compete by
  // score only when it is not.
  bool window = workload.record.spec.placement.ready_window.count() > 0;
  // Only the cheapest READYs compete: room held now before any offer to
  // preempt, then the fewest victims of the lowest priority.
  std::optional<Cost> cheapest;
  for (const auto& [peer_id, progress] : workload.candidates) {
    if (progress.state != CandidateState::kReady || taken.count(peer_id)) continue;
    if (!cheapest || cost_of(progress) < *cheapest) cheapest = cost_of(progress);
  }
  if (!cheapest) return;
  auto first_ranked = workload.candidates.find(workload.preferred);
  if (!window && first_ranked != workload.candidates.end() &&
      first_ranked->second.state == CandidateState::kReady && !taken.count(workload.preferred) &&
      cost_of(first_ranked->second) == *cheapest) {
    choose_winner(workload, workload.preferred, "first-ranked; " + why);
    return;
  }
  for (const auto& [peer_id, progress] : workload.candidates) {
    if (progress.state != CandidateState::kReady || taken.count(peer_id)) continue;
    if (cost_of(progress) != *cheapest) continue;
    std::string name = context_.cluster_name_of(peer_id);
    // The engine's score of the target (its rank by the workload's policy)
    // plus the target's own fit from its READY.
    auto ranked = workload.engine_scores.find(peer_id);
    double rank = ranked == workload.engine_scores.end() ? 0 : ranked->second;
    double score = rank + progress.score;
    // A tie goes to the round's first-ranked target, else by a hash of
    // (uid, cluster) when asked (spread_ties), else by name.
    bool tie_won;
    uint64_t hash = spread_ties ? tie_hash(workload.record.uid, name) : 0;
    if (best && *best == workload.preferred) tie_won = false;
    else if (peer_id == workload.preferred) tie_won = true;
    else tie_won = hash < best_hash || (hash == best_hash && name < best_name);
    if (!best || score > best_score || (score == best_score && tie_won)) {
      best = &peer_id;
      best_score = score;
      best_rank = rank;
      best_fit = progress.score;
      best_name = name;
      best_hash = hash;
    }
  }
  if (!best) return;
  char score[96];
  std::snprintf(score, sizeof score, "%.1f (rank %.1f + READY %.1f)", best_score, best_rank, best_fit);
  std::string cost = cheapest->victims == 0
                         ? ""
                         : "; preempts " + std::to_string(cheapest->victims) +
                               " workload(s) of priority up to " + std::to_string(cheapest->priority) +
                               ", the cheapest offer";
  choose_winner(workload, *best, "best score " + std::string(score) + " of the READYs" + cost + "; " + why);
}

void SourceRole::on_reject(const std::string& from, const protocol::Reject& message) {
  ++context_.stats().rejections_heard[std::string(protocol::reject_code_name(message.code))];
  SourceWorkload* workload = find_source_workload(message.uid);
  if (!workload) return;
  store::WorkloadRecord& record = workload->record;
  if (message.epoch != record.epoch || model::is_finished(record.phase) || record.deleting) return;
  std::string cluster = context_.cluster_name_of(from);
  if (record.winner == from && !workload->approved_in_advance) {
    // The winner lost its reservation before binding: place again.
    if (record.phase != model::Phase::kPlacing) return;
    context_.record_event(record.uid,
                          "winner " + cluster + " rejected approval: " + message.reason);
    record.winner.clear();
    record.cluster.clear();
    start_round(*workload);
    return;
  }
  if (record.winner == from) {
    // Approved in advance, it had no room to bind at once (what it last
    // advertised is gone): no longer the winner, it binds this epoch only
    // on an APPROVE now. The round goes on as for any refused CANDIDATE.
    workload->approved_in_advance = false;
    record.winner.clear();
    record.cluster.clear();
    persist(record);
  }
  auto progress = workload->candidates.find(from);
  if (progress == workload->candidates.end()) return;
  // A repeated answer changes nothing; but a target that queued this epoch
  // may refuse it for good when a renewal asks again (renew_queued): that
  // refusal replaces "queued there".
  bool was_queued = progress->second.state == CandidateState::kRejected &&
                    progress->second.code == protocol::RejectCode::kNoCapacity;
  if (progress->second.state == CandidateState::kRejected &&
      !(was_queued && message.code != protocol::RejectCode::kNoCapacity)) {
    return;
  }
  if (message.code == protocol::RejectCode::kAlreadyBound && record.winner.empty() &&
      may_place_at(record, from)) {
    // The target still runs a copy of an earlier epoch that nothing replaced.
    adopt(*workload, from, 0);
    return;
  }
  progress->second.state = CandidateState::kRejected;
  progress->second.code = message.code;
  progress->second.reason = message.reason;
  context_.record_event(record.uid, cluster + " rejected: " + message.reason);
  // READYs that waited for this target (the first-ranked) need wait no more.
  if (record.winner.empty() && from == workload->preferred) readied_.insert(record.uid);
  if (record.winner.empty() && record.spec.placement.ready_window.count() > 0 &&
      workload->untried.empty()) {
    if (has_ready(*workload) && all_answered(*workload)) {
      choose_best_ready(*workload, "every candidate answered");
      return;
    }
  }
  bool every_one_rejected = all_rejected(*workload);
  if (every_one_rejected && record.winner.empty() && !workload->untried.empty()) {
    ask_next_batch(*workload);  // Incremental: no point waiting out the round
    return;
  }
  if (every_one_rejected && record.winner.empty()) {
    std::string reason = "Unschedulable: all clusters rejected:";
    for (const auto& [peer_id, p] : workload->candidates) {
      reason += " " + context_.cluster_name_of(peer_id) + "=" + p.reason;
    }
    if (!workload->unasked.empty()) reason += "; not asked:" + workload->unasked;
    make_pending(*workload, reason);
    // Lost a race to a sibling copy: the next round leaves the sibling's
    // cluster out, so it can start now instead of after the backoff.
    if (lost_to_sibling(*workload)) workload->next_round_at = clock_.now();
  }
}

void SourceRole::on_released(const std::string& from, const protocol::Released& message) {
  SourceWorkload* workload = find_source_workload(message.uid);
  if (!workload) return;
  auto cancel = workload->cancels.find(from);
  if (cancel != workload->cancels.end() && cancel->second.epoch <= message.epoch) {
    workload->cancels.erase(cancel);
  }
  auto deleting = workload->deletes.find(from);
  if (deleting != workload->deletes.end() && deleting->second.epoch <= message.epoch) {
    workload->deletes.erase(deleting);
    context_.record_event(message.uid, "stopped and released at " + context_.cluster_name_of(from));
  }
}

void SourceRole::on_bound(const std::string& from, const protocol::Bound& message) {
  SourceWorkload* workload = find_source_workload(message.uid);
  if (!workload) return;
  store::WorkloadRecord& record = workload->record;
  if (record.winner != from || record.epoch != message.epoch ||
      record.phase != model::Phase::kPlacing || record.deleting) {
    return;
  }
  record.phase = model::Phase::kBound;
  record.nodes = message.nodes;
  record.updated_at = clock_.now();
  persist(record);
  if (workload->approved_in_advance) {
    // Decided now, as choose_winner decides a winner that was READY.
    ++context_.stats().placements_approved_in_advance;
    workload->approved_in_advance = false;
    workload->untried.clear();
    workload->pending_attempts = 0;
  }
  context_.record_event(record.uid, "bound at " + record.cluster);
  AgentStats& stats = context_.stats();
  ++stats.placements_bound;
  if (record.restarts == 0) {
    stats.placement_latency.observe(
        std::chrono::duration<double>(record.updated_at - record.created_at).count());
  }
  // Its next CAPACITY counts this workload (our own cluster's counts are
  // read live): then we stop counting it ourselves.
  if (workload->expected_at == from) {
    if (from == self_id_) {
      targets_.expect_at(*workload, "");
      workload->advertised_by = from;
    } else {
      workload->acknowledged = true;
      targets_.acknowledge(from, record.uid);
    }
  }
}

}  // namespace shoal::core::source
