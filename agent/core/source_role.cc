// The source role: place each submitted workload on exactly one cluster.
// Send CANDIDATE to the clusters its policy ranks (source_placement.cc),
// take the first-ranked READY, or the best READY once it has waited enough,
// as winner (persisted before APPROVE leaves), CANCEL the rest.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <tuple>

#include "agent/core/source_role.h"
#include "common/check.h"

namespace shoal::core {

bool SourceRole::may_hold_something(const CandidateProgress& progress) {
  // A NoCapacity REJECT means the target queued the candidate.
  return progress.state != CandidateState::kRejected ||
         progress.code == protocol::RejectCode::kNoCapacity;
}

Result<std::vector<std::string>> SourceRole::submit(const std::vector<model::WorkloadSpec>& specs) {
  std::set<std::string> named;
  for (const auto& spec : specs) {
    const model::PlacementSpec& p = spec.placement;
    if (p.ready_window >= config_.reservation_ttl) {
      return invalid_argument("workload " + spec.key() + " spec.placement.readyWindow: expected less than "
                              "reservationTTL (" + format_duration(config_.reservation_ttl) +
                              "), or the reservations expire before the window closes");
    }
    if (!p.clusters.empty() && static_cast<size_t>(p.number_of_clusters) > p.clusters.size()) {
      return invalid_argument("workload " + spec.key() + " spec.placement.numberOfClusters: expected at most " +
                              std::to_string(p.clusters.size()) +
                              " (one copy per cluster, and spec.placement.clusters lists that many)");
    }
    if (p.min_ready > 0 && p.ready_window.count() == 0) {
      return invalid_argument("workload " + spec.key() +
                              " spec.placement.minReady: needs a readyWindow (the longest to wait)");
    }
    // What cannot travel would stay Placing forever: every CANDIDATE would
    // be refused by the receiver's frame limit, and nothing would say why.
    size_t encoded = protocol::encode_body(protocol::Candidate{std::string(32, '0'), 0, spec}).size();
    if (encoded > protocol::kMaxBodyBytes) {
      return invalid_argument("workload " + spec.key() + ": its spec takes " + std::to_string(encoded) +
                              " bytes on the wire, more than a message may carry (" +
                              std::to_string(protocol::kMaxBodyBytes) + "); shorten metadata.labels");
    }
    if (book_.find_named(spec.key())) {
      return Status(ErrorCode::kAlreadyExists, "workload " + spec.key() + " already exists");
    }
    if (!named.insert(spec.key()).second) {
      return invalid_argument("workload " + spec.key() + " metadata.name: appears twice in one submission");
    }
  }
  std::vector<std::string> uids;
  TimePoint now = clock_.now();
  for (const auto& spec : specs) {
    SourceWorkload workload;
    store::WorkloadRecord& record = workload.record;
    record.uid = context_.new_uid();
    record.spec = spec;
    // What this agent's operator set for every workload, stored with the
    // spec so that each copy carries it to its target (which enforces it).
    if (record.spec.start_timeout.count() == 0) record.spec.start_timeout = config_.start_timeout;
    record.phase = model::Phase::kPending;
    record.created_at = now;
    record.updated_at = now;
    uids.push_back(record.uid);
    int32_t copies = spec.placement.number_of_clusters;
    SourceWorkload& stored = book_.add(std::move(workload));
    persist(stored.record);
    record_event(stored.record.uid,
                 "submitted " + spec.key() + " (" + std::to_string(spec.replicas) + " x " +
                     spec.resources.to_string() + ")" +
                     (copies > 1 ? ", one copy on each of " + std::to_string(copies) + " clusters" : ""));
    if (copies == 1) {
      start_round(stored);
      continue;
    }
    // A group: each copy is placed like a workload of its own, under the
    // group's name, never on a cluster where a sibling runs.
    std::string group_uid = stored.record.uid;
    for (int32_t index = 1; index <= copies; ++index) {
      SourceWorkload copy;
      copy.record = stored.record;
      copy.record.uid = group_uid + "-" + std::to_string(index);
      copy.record.parent = group_uid;
      copy.record.copy_index = index;
      SourceWorkload& placed = book_.add(std::move(copy));
      persist(placed.record);
      start_round(placed);
    }
  }
  SHOAL_RETURN_IF_ERROR(context_.store_health());
  return uids;
}

bool SourceRole::holds_slot(const store::WorkloadRecord& record) {
  bool group = record.parent.empty() && record.spec.placement.number_of_clusters > 1;
  return record.phase == model::Phase::kPlacing && record.winner.empty() && !record.deleting &&
         !group;
}

void SourceRole::wait_for_slot(SourceWorkload& workload) {
  store::WorkloadRecord& record = workload.record;
  if (workload.waiting_ticket != 0) return;
  const std::string reason = "WaitingForSlot: " + std::to_string(config_.placement_window) +
                             " workloads are being placed (placementWindow)";
  if (record.phase != model::Phase::kPending || record.reason != reason) {
    record.phase = model::Phase::kPending;
    record.reason = reason;
    record.updated_at = clock_.now();
    persist(record);
  }
  window_.join(workload);
  // Room cannot help what waits for a slot; its round, once admitted, can
  // make it a room waiter (make_pending).
  room_waiters_.erase(record.uid);
}

bool SourceRole::admit_waiting() {
  if (admitting_) return false;
  admitting_ = true;
  bool started = false;
  while (SourceWorkload* admitted = window_.admit_next(book_)) {
    SourceWorkload& workload = *admitted;
    const std::string& uid = workload.record.uid;
    due_.wake(uid);
    due_.touch(uid);
    start_round(workload);  // takes a slot, or ends Pending (no target can take it)
    started = true;
  }
  admitting_ = false;
  return started;
}

void SourceRole::start_round(SourceWorkload& workload) {
  store::WorkloadRecord& record = workload.record;
  TimePoint now = clock_.now();
  // A round restarted keeps its slot; a new one needs a free slot, and
  // whoever waits already goes first.
  if (!window_.holds(record.uid) && window_.must_wait(workload, admitting_)) {
    wait_for_slot(workload);
    return;
  }
  RankedTargets targets = round_targets(workload, &workload.untried);
  // Whatever the last round still holds (or has queued) somewhere is
  // released, except where the new round's candidate supersedes it: a queued
  // candidate keeps its place in that target's line.
  for (const auto& [peer_id, progress] : workload.candidates) {
    bool asked_again = std::any_of(targets.ranked.begin(), targets.ranked.end(),
                                   [&, &asked = peer_id](const auto& target) { return target.first == asked; });
    if (may_hold_something(progress) && !asked_again) cancel_at(workload, peer_id, record.epoch);
  }
  workload.candidates.clear();
  workload.unasked = targets.reason;
  workload.preferred.clear();
  workload.first_ready_at = TimePoint{};
  if (targets.ranked.empty()) {
    make_pending(workload, "Unschedulable: no cluster can take it now:" + targets.reason);
    return;
  }
  record.epoch += 1;
  record.phase = model::Phase::kPlacing;
  record.reason.clear();
  record.winner.clear();
  record.cluster.clear();
  record.updated_at = now;
  record.status_generation = 0;  // a new copy counts its own generations
  persist(record);
  workload.round_started = now;
  workload.wave_started = now;
  std::string names;
  for (const auto& [peer_id, name] : targets.ranked) {
    names += (names.empty() ? "" : ", ") + name;
    workload.candidates[peer_id] = {CandidateState::kSent, protocol::RejectCode::kOther, "", now};
  }
  workload.engine_scores = std::move(targets.engine_score);  // Incremental's later batches too
  // The first-ranked is where this workload counts until its target says
  // otherwise, and whose READY the others wait for (preferredWait).
  workload.preferred = targets.ranked.front().first;
  follow_expectation(workload);
  record_event(record.uid, "epoch " + std::to_string(record.epoch) + ": candidates " + names +
                               (workload.untried.empty()
                                    ? ""
                                    : " (" + std::to_string(workload.untried.size()) + " more later)") +
                               "; ranked " + targets.decision);
  for (const auto& [peer_id, name] : targets.ranked) {
    send(peer_id, protocol::Candidate{record.uid, record.epoch, record.spec});
  }
}

SourceRole::RankedTargets SourceRole::round_targets(
    const SourceWorkload& workload, std::vector<std::pair<std::string, std::string>>* untried) {
  const store::WorkloadRecord& record = workload.record;
  RankedTargets targets = rank_targets(record);
  // The dispatcher decides who hears of it now: everyone (AllAtOnce), the
  // d*N best (Sample), or the best k with k more per round (Incremental).
  const model::PlacementSpec& placement = record.spec.placement;
  model::Dispatcher dispatcher = placement.dispatcher.value_or(config_.default_dispatcher);
  untried->clear();
  if (dispatcher == model::Dispatcher::kSample) {
    size_t sample = static_cast<size_t>(placement.sample_factor) *
                    static_cast<size_t>(std::max(1, placement.number_of_clusters));
    if (targets.ranked.size() > sample) targets.ranked.resize(sample);
  } else if (dispatcher == model::Dispatcher::kExternal) {
    // Only the operator's nominees, in rank order.
    const auto& nominated = record.nominations;
    std::erase_if(targets.ranked, [&](const auto& target) {
      return !nominated || std::find(nominated->begin(), nominated->end(),
                                     cluster_name_of(target.first)) == nominated->end();
    });
    if (!nominated) targets.reason = " waiting for nominations (shoalctl nominate)";
  } else if (dispatcher == model::Dispatcher::kIncremental) {
    size_t batch = static_cast<size_t>(std::max(1, placement.incremental_batch));
    if (targets.ranked.size() > batch) {
      untried->assign(targets.ranked.begin() + static_cast<std::ptrdiff_t>(batch),
                      targets.ranked.end());
      targets.ranked.resize(batch);
    }
  }
  return targets;
}

bool SourceRole::renew_queued(SourceWorkload& workload) {
  if (!waits_in_every_queue(workload)) return false;
  // Only if a new round would ask exactly the targets that queue it now; a
  // new or vanished target, or another sample, needs a real round.
  std::vector<std::pair<std::string, std::string>> untried;
  RankedTargets targets = round_targets(workload, &untried);
  if (!untried.empty() || targets.ranked.size() != workload.candidates.size()) return false;
  for (const auto& [peer_id, name] : targets.ranked) {
    if (!workload.candidates.count(peer_id)) return false;
  }
  // The same epoch's CANDIDATE again: each target restarts its queue_hold
  // and answers NoCapacity (already known: nothing changes here) or, with
  // room, READY. No new epoch, no write, no slot of the window: keeping
  // 100,000 queued workloads in line was a round each per minute, and that
  // was most of what such an agent did.
  const store::WorkloadRecord& record = workload.record;
  for (const auto& [peer_id, progress] : workload.candidates) {
    send(peer_id, protocol::Candidate{record.uid, record.epoch, record.spec});
  }
  workload.next_round_at = clock_.now() + backoff(workload.pending_attempts);
  workload.pending_attempts += 1;  // to pendingRetryMax, well inside queueHold
  park(workload);
  return true;
}

void SourceRole::ask_next_batch(SourceWorkload& workload) {
  store::WorkloadRecord& record = workload.record;
  TimePoint now = clock_.now();
  size_t batch = static_cast<size_t>(std::max(1, record.spec.placement.incremental_batch));
  size_t count = std::min(batch, workload.untried.size());
  std::string names;
  for (size_t i = 0; i < count; ++i) {
    const auto& [peer_id, name] = workload.untried[i];
    names += (names.empty() ? "" : ", ") + name;
    workload.candidates[peer_id] = {CandidateState::kSent, protocol::RejectCode::kOther, "", now};
    send(peer_id, protocol::Candidate{record.uid, record.epoch, record.spec});
  }
  workload.untried.erase(workload.untried.begin(), workload.untried.begin() + static_cast<std::ptrdiff_t>(count));
  workload.wave_started = now;
  record_event(record.uid, "epoch " + std::to_string(record.epoch) + ": more candidates " + names);
}

void SourceRole::make_pending(SourceWorkload& workload, const std::string& reason) {
  store::WorkloadRecord& record = workload.record;
  bool changed = record.phase != model::Phase::kPending || record.reason != reason;
  record.phase = model::Phase::kPending;
  record.reason = reason;
  record.winner.clear();
  record.cluster.clear();
  record.updated_at = clock_.now();
  // The candidates stay: a target that queued one may still answer READY
  // for this epoch, and the others must then be cancelled.
  // Exponential backoff; new advertised room brings the retry forward.
  workload.next_round_at = clock_.now() + backoff(workload.pending_attempts);
  workload.pending_attempts += 1;
  if (changed) {
    persist(record);
    record_event(record.uid, "pending: " + reason);
  }
  if (waits_in_every_queue(workload)) {
    room_waiters_.erase(record.uid);
    park(workload);
  } else {
    room_waiters_.insert(record.uid);
  }
}

void SourceRole::park(SourceWorkload& workload) {
  unpark(workload);
  workload.parked_until = std::max(workload.next_round_at, workload.record.restart_at);
  parked_.emplace(workload.parked_until, workload.record.uid);
}

void SourceRole::unpark(SourceWorkload& workload) {
  if (workload.parked_until == TimePoint{}) return;
  parked_.erase({workload.parked_until, workload.record.uid});
  workload.parked_until = TimePoint{};
  due_.wake(workload.record.uid);
}

void SourceRole::wake_parked(TimePoint now) {
  // A bounded herd per tick: work submitted together parks until the same
  // instant, and 20,000 woken in one tick held the loop (control requests,
  // peers) for a quarter of a second. The rest stay due, so the loop ticks
  // again as soon as it has served what waits.
  for (int woken = 0; woken < kMostWokenPerTick && !parked_.empty() && parked_.begin()->first <= now;) {
    auto [at, uid] = *parked_.begin();
    parked_.erase(parked_.begin());
    SourceWorkload* found = book_.find(uid);
    if (!found || found->parked_until != at) continue;  // stale
    found->parked_until = TimePoint{};
    due_.wake(uid);
    ++woken;
  }
}

bool SourceRole::waits_in_every_queue(const SourceWorkload& workload) {
  if (workload.candidates.empty() || !workload.untried.empty() || !workload.unasked.empty()) {
    return false;
  }
  return std::all_of(workload.candidates.begin(), workload.candidates.end(), [](const auto& entry) {
    return entry.second.state == CandidateState::kRejected &&
           entry.second.code == protocol::RejectCode::kNoCapacity;
  });
}

Duration SourceRole::backoff(int doublings) const {
  Duration wait = config_.pending_retry;
  for (int i = 0; i < doublings && wait < config_.pending_retry_max; ++i) wait *= 2;
  return std::min(wait, config_.pending_retry_max);
}

SourceWorkload* SourceRole::find_source_workload(const std::string& uid) {
  SourceWorkload* found = book_.find(uid);
  if (found) due_.touch(uid);  // a message for it may change when it is due
  return found;
}

void SourceRole::cancel_at(SourceWorkload& workload, const std::string& peer_id, uint64_t epoch) {
  // One CANCEL per (workload, epoch, target): one already on its way for
  // this epoch or a newer one covers it (a late READY from a target we are
  // cancelling is answered by the pending CANCEL, retried on its own timer).
  auto pending = workload.cancels.find(peer_id);
  if (pending != workload.cancels.end() && pending->second.epoch >= epoch) return;
  TimePoint now = clock_.now();
  workload.cancels[peer_id] = {epoch, now, now + config_.reservation_ttl};
  due_.wake(workload.record.uid);
  due_.touch(workload.record.uid);
  send(peer_id, protocol::Cancel{workload.record.uid, epoch});
}

void SourceRole::on_capacity(const std::string& from, const protocol::Capacity& message) {
  // What it said BOUND to before this CAPACITY, it now counts itself.
  std::vector<std::string> acknowledged = targets_.advertised(from, message);
  const TargetLedger::Target& peer = *targets_.find(from);
  for (const std::string& uid : acknowledged) {
    SourceWorkload* found = book_.find(uid);
    if (found && found->expected_at == from && found->acknowledged) {
      expect_at(*found, "");
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
    send(from, protocol::Cancel{message.uid, message.epoch});
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
        send(from, protocol::Approve{record.uid, record.epoch});
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
  if (sibling_winners(record).count(from)) {
    refuse_for_sibling(*workload, from, message.epoch);
    return;
  }
  CandidateProgress& progress = workload->candidates[from];
  if (workload->first_ready_at == TimePoint{}) workload->first_ready_at = clock_.now();
  // A repeated READY (answering a re-sent CANDIDATE) says nothing new: the
  // score is the one the reservation was made with.
  if (progress.state != CandidateState::kReady) progress.score = message.score;
  progress.state = CandidateState::kReady;
  const model::PlacementSpec& placement = record.spec.placement;
  if (placement.ready_window.count() > 0 && !served_from_queue) {
    // Scoring window: hold the reservations until the window closes, minReady
    // answers are in, or nobody is left to answer; then take the best.
    int readies = 0;
    bool all_answered = workload->untried.empty();
    for (const auto& [peer_id, p] : workload->candidates) {
      if (p.state == CandidateState::kReady) ++readies;
      if (p.state == CandidateState::kSent) all_answered = false;
    }
    if (placement.min_ready > 0 && readies >= placement.min_ready) {
      choose_best_ready(*workload, std::to_string(readies) + " READY (minReady)");
    } else if (all_answered) {
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
    // A sibling copy may have won at one of them in this same step.
    std::set<std::string> taken = sibling_winners(record);
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
    if (waits_for_preferred(workload, clock_.now())) {
      unpark(workload);
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
  record.cluster = cluster_name_of(target);
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
  record_event(record.uid, "winner " + record.cluster + " (" + why + ")");
  send(target, protocol::Approve{record.uid, record.epoch});
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
  std::set<std::string> taken = sibling_winners(workload.record);
  // Without a readyWindow the engine's own pick wins whenever it is READY:
  // the live decision is the one `place --live` shows. The rest compete by
  // score only when it is not.
  bool window = workload.record.spec.placement.ready_window.count() > 0;
  auto first_ranked = workload.candidates.find(workload.preferred);
  if (!window && first_ranked != workload.candidates.end() &&
      first_ranked->second.state == CandidateState::kReady && !taken.count(workload.preferred)) {
    choose_winner(workload, workload.preferred, "first-ranked; " + why);
    return;
  }
  for (const auto& [peer_id, progress] : workload.candidates) {
    if (progress.state != CandidateState::kReady || taken.count(peer_id)) continue;
    std::string name = cluster_name_of(peer_id);
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
  choose_winner(workload, *best, "best score " + std::string(score) + " of the READYs; " + why);
}

void SourceRole::on_reject(const std::string& from, const protocol::Reject& message) {
  ++context_.stats().rejections_heard[std::string(protocol::reject_code_name(message.code))];
  SourceWorkload* workload = find_source_workload(message.uid);
  if (!workload) return;
  store::WorkloadRecord& record = workload->record;
  if (message.epoch != record.epoch || model::is_finished(record.phase) || record.deleting) return;
  std::string cluster = cluster_name_of(from);
  if (record.winner == from) {
    // The winner lost its reservation before binding: place again.
    if (record.phase != model::Phase::kPlacing) return;
    record_event(record.uid, "winner " + cluster + " rejected approval: " + message.reason);
    record.winner.clear();
    record.cluster.clear();
    start_round(*workload);
    return;
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
  record_event(record.uid, cluster + " rejected: " + message.reason);
  // READYs that waited for this target (the first-ranked) need wait no more.
  if (record.winner.empty() && from == workload->preferred) readied_.insert(record.uid);
  if (record.winner.empty() && record.spec.placement.ready_window.count() > 0 &&
      workload->untried.empty()) {
    bool any_ready = false, all_answered = true;
    for (const auto& [peer_id, p] : workload->candidates) {
      any_ready = any_ready || p.state == CandidateState::kReady;
      all_answered = all_answered && p.state != CandidateState::kSent;
    }
    if (any_ready && all_answered) {
      choose_best_ready(*workload, "every candidate answered");
      return;
    }
  }
  bool all_rejected = std::all_of(workload->candidates.begin(), workload->candidates.end(),
                                  [](const auto& entry) {
                                    return entry.second.state == CandidateState::kRejected;
                                  });
  if (all_rejected && record.winner.empty() && !workload->untried.empty()) {
    ask_next_batch(*workload);  // Incremental: no point waiting out the round
    return;
  }
  if (all_rejected && record.winner.empty()) {
    std::string reason = "Unschedulable: all clusters rejected:";
    for (const auto& [peer_id, p] : workload->candidates) {
      reason += " " + cluster_name_of(peer_id) + "=" + p.reason;
    }
    if (!workload->unasked.empty()) reason += "; not asked:" + workload->unasked;
    make_pending(*workload, reason);
    // Lost a race to a sibling copy: the next round leaves the sibling's
    // cluster out, so it can start now instead of after the backoff.
    bool lost_to_sibling = std::any_of(
        workload->candidates.begin(), workload->candidates.end(), [](const auto& entry) {
          return entry.second.code == protocol::RejectCode::kHoldsAnotherCopy;
        });
    if (lost_to_sibling) workload->next_round_at = clock_.now();
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
    record_event(message.uid, "stopped and released at " + cluster_name_of(from));
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
  record_event(record.uid, "bound at " + record.cluster);
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
      expect_at(*workload, "");
      workload->advertised_by = from;
    } else {
      workload->acknowledged = true;
      targets_.acknowledge(from, record.uid);
    }
  }
}

}  // namespace shoal::core
