// The source role: place each submitted workload on exactly one cluster.
// Send CANDIDATE to every eligible cluster, take the first READY as winner
// (persisted before APPROVE leaves), CANCEL the rest, mirror STATUS.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <tuple>

#include "agent/core/agent.h"

namespace shoal::core {

namespace {

// The agent honors the allow list today; the rest of spec.placement is
// evaluated by `shoalctl place` and reaches the agent with the dispatchers.
// Refusing beats silently ignoring a policy the user asked for.
Status check_supported_placement(const model::WorkloadSpec& spec) {
  const model::PlacementSpec& p = spec.placement;
  std::string field;
  if (!p.cluster_selector.empty()) field = "clusterSelector";
  else if (!p.claim_selector.empty()) field = "claimSelector";
  else if (p.routing) field = "routing";
  else if (!p.spread_constraints.empty()) field = "spreadPolicy";
  else if (!p.prioritizers.empty() || p.exact_mode) field = "prioritizerPolicy";
  if (field.empty()) return Status::ok();
  return invalid_argument("workload " + spec.key() + " spec.placement." + field +
                          ": not supported by shoald yet (only spec.placement.clusters is); "
                          "`shoalctl place` evaluates it offline");
}

// The room a target advertised for a workload of `queue` in one namespace:
// the queue's own numbers when the target lists queues, the namespace's
// otherwise; nullopt when the target lists queues but not this one.
std::optional<std::pair<model::Resources, model::Resources>> advertised_room(
    const protocol::NamespaceCapacity& advertised, const std::string& queue) {
  if (advertised.queues.empty()) return std::make_pair(advertised.free, advertised.largest_free_node);
  for (const auto& q : advertised.queues) {
    if (q.queue == queue) return std::make_pair(q.free, q.largest_free_node);
  }
  return std::nullopt;
}

}  // namespace

bool Agent::may_hold_something(const CandidateProgress& progress) {
  // A NoCapacity REJECT means the target queued the candidate.
  return progress.state != CandidateState::kRejected ||
         progress.code == protocol::RejectCode::kNoCapacity;
}

Result<std::vector<std::string>> Agent::submit(const std::vector<model::WorkloadSpec>& specs) {
  for (const auto& spec : specs) {
    SHOAL_RETURN_IF_ERROR(check_supported_placement(spec));
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
    if (uid_by_name_.count(spec.key())) {
      return Status(ErrorCode::kAlreadyExists, "workload " + spec.key() + " already exists");
    }
  }
  std::vector<std::string> uids;
  TimePoint now = clock_.now();
  for (const auto& spec : specs) {
    SourceWorkload workload;
    store::WorkloadRecord& record = workload.record;
    record.uid = new_uid();
    record.spec = spec;
    record.phase = model::Phase::kPending;
    record.created_at = now;
    record.updated_at = now;
    uid_by_name_[spec.key()] = record.uid;
    uids.push_back(record.uid);
    int32_t copies = spec.placement.number_of_clusters;
    auto& stored = workloads_[record.uid] = std::move(workload);
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
      copies_[group_uid].push_back(copy.record.uid);
      auto& placed = workloads_[copy.record.uid] = std::move(copy);
      persist(placed.record);
      start_round(placed);
    }
  }
  drain_local();
  SHOAL_RETURN_IF_ERROR(store_health_);
  return uids;
}

Agent::RankedTargets Agent::rank_targets(const model::WorkloadSpec& spec,
                                         const std::set<std::string>& exclude) const {
  // The placement engine decides over what we know of each target: our own
  // cluster directly, peers from their invitations and CAPACITY messages.
  RankedTargets out;
  std::vector<model::ClusterCandidate> candidates;
  std::map<std::string, std::string> peer_by_name;
  auto add = [&](const std::string& peer_id, std::string name, model::ClusterCandidate candidate) {
    if (peer_by_name.count(name)) name += "#" + peer_id.substr(0, 6);  // two peers, one name
    candidate.name = name;
    peer_by_name[name] = peer_id;
    candidates.push_back(std::move(candidate));
  };
  std::string unadvertised;
  if (exclude.count(self_id_)) {
    unadvertised += " " + config_.cluster + "=HoldsAnotherCopy";
  } else if (auto own = cluster_.capacity_for(spec.namespace_name, spec.queue)) {
    model::ClusterCandidate self;
    self.labels = cluster_.spec().labels;
    self.claims = cluster_.spec().claims;
    self.free = own->free;
    self.largest_free_node = own->largest_free_node;
    add(self_id_, config_.cluster, std::move(self));
  } else {
    unadvertised += " " + config_.cluster + "=NoSuchQueue:" + spec.queue;
  }
  for (const auto& [id, peer] : peers_) {
    auto accepted = valid_accepted(id);
    if (accepted.empty()) continue;  // not a target of ours
    if (lost(id)) {
      unadvertised += " " + peer.cluster + "=Unreachable";
      continue;
    }
    if (exclude.count(id)) {
      unadvertised += " " + peer.cluster + "=HoldsAnotherCopy";
      continue;
    }
    model::ClusterCandidate candidate;
    std::vector<std::string> namespaces;
    for (const auto* invitation : accepted) {
      namespaces.insert(namespaces.end(), invitation->namespaces.begin(), invitation->namespaces.end());
    }
    candidate.namespaces = std::move(namespaces);
    auto capacity = peer.capacity.find(spec.namespace_name);
    if (capacity == peer.capacity.end() && candidate.namespaces->end() !=
            std::find(candidate.namespaces->begin(), candidate.namespaces->end(), spec.namespace_name)) {
      unadvertised += " " + peer.cluster + "=NoCapacityAdvertised";
      continue;
    }
    if (capacity != peer.capacity.end()) {
      auto room = advertised_room(capacity->second, spec.queue);
      if (!room) {
        unadvertised += " " + peer.cluster + "=NoSuchQueue:" + spec.queue;
        continue;
      }
      std::tie(candidate.free, candidate.largest_free_node) = *room;
    }
    add(id, peer.cluster, std::move(candidate));
  }
  // Rank every eligible target: AllAtOnce sends to all of them, best first.
  model::PlacementSpec policy = spec.placement;
  policy.number_of_clusters = static_cast<int32_t>(candidates.size());
  if (policy.prioritizers.empty()) policy.prioritizers.push_back({"ResourceAllocatableCPU", 1});
  placement::PlacementOutcome outcome = placement::place(spec, policy, candidates, {});
  for (const auto& name : outcome.decisions) out.ranked.emplace_back(peer_by_name.at(name), name);
  // Nobody has room now? Targets that lack only free room still get the
  // candidate: they queue it and serve it in their fair-share order when
  // room frees, instead of whoever retries first getting it.
  bool queue_at_full_targets = out.ranked.empty();
  for (const auto& filtered : outcome.filtered) {
    if (queue_at_full_targets && filtered.lacks_only_room) {
      out.ranked.emplace_back(peer_by_name.at(filtered.cluster), filtered.cluster);
    } else {
      out.reason += " " + filtered.cluster + "=" + filtered.reason;
    }
  }
  out.reason += unadvertised;
  return out;
}

void Agent::start_round(SourceWorkload& workload) {
  store::WorkloadRecord& record = workload.record;
  TimePoint now = clock_.now();
  RankedTargets targets = rank_targets(record.spec, sibling_winners(record));
  // The dispatcher decides who hears of it now: everyone (AllAtOnce), the
  // d*N best (Sample), or the best k with k more per round (Incremental).
  const model::PlacementSpec& placement = record.spec.placement;
  model::Dispatcher dispatcher = placement.dispatcher.value_or(config_.default_dispatcher);
  workload.untried.clear();
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
      workload.untried.assign(targets.ranked.begin() + static_cast<std::ptrdiff_t>(batch), targets.ranked.end());
      targets.ranked.resize(batch);
    }
  }
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
  record_event(record.uid, "epoch " + std::to_string(record.epoch) + ": candidates " + names +
                               (workload.untried.empty()
                                    ? ""
                                    : " (" + std::to_string(workload.untried.size()) + " more later)"));
  for (const auto& [peer_id, name] : targets.ranked) {
    send(peer_id, protocol::Candidate{record.uid, record.epoch, record.spec});
  }
}

void Agent::ask_next_batch(SourceWorkload& workload) {
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

void Agent::make_pending(SourceWorkload& workload, const std::string& reason) {
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
}

Duration Agent::resend_after(int resends) const {
  return config_.retry_interval * (int64_t{1} << std::min(resends, 3));
}

Duration Agent::backoff(int doublings) const {
  Duration wait = config_.pending_retry;
  for (int i = 0; i < doublings && wait < config_.pending_retry_max; ++i) wait *= 2;
  return std::min(wait, config_.pending_retry_max);
}

Agent::SourceWorkload* Agent::find_source_workload(const std::string& uid) {
  auto it = workloads_.find(uid);
  return it == workloads_.end() ? nullptr : &it->second;
}

void Agent::cancel_at(SourceWorkload& workload, const std::string& peer_id, uint64_t epoch) {
  TimePoint now = clock_.now();
  workload.cancels[peer_id] = {epoch, now, now + config_.reservation_ttl};
  awake_.insert(workload.record.uid);
  send(peer_id, protocol::Cancel{workload.record.uid, epoch});
}

void Agent::on_capacity(const std::string& from, const protocol::Capacity& message) {
  Peer& peer = peers_[from];
  peer.capacity.clear();
  for (const auto& ns : message.namespaces) peer.capacity[ns.namespace_name] = ns;
  // Pending work that this peer now has room for is tried again at once
  // rather than after the backoff.
  for (auto& [uid, workload] : workloads_) {
    const store::WorkloadRecord& record = workload.record;
    if (record.phase != model::Phase::kPending || is_group(workload)) continue;
    auto advertised = peer.capacity.find(record.spec.namespace_name);
    if (advertised == peer.capacity.end()) continue;
    auto room = advertised_room(advertised->second, record.spec.queue);
    if (room && room->second.fits(record.spec.resources) && room->first.fits(record.spec.total())) {
      workload.next_round_at = std::min(workload.next_round_at, clock_.now());
    }
  }
}

void Agent::on_ready(const std::string& from, const protocol::Ready& message) {
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
    // Another copy of this workload won there first: one copy per cluster.
    cancel_at(*workload, from, message.epoch);
    on_reject(from, protocol::Reject{record.uid, message.epoch, "HoldsAnotherCopy",
                                     protocol::RejectCode::kHoldsAnotherCopy});
    return;
  }
  CandidateProgress& progress = workload->candidates[from];
  progress.state = CandidateState::kReady;
  progress.score = message.score;
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
  // First READY wins (a READY while Pending comes from a target that queued
  // this epoch's candidate and now has room).
  choose_winner(*workload, from,
                "first READY of epoch " + std::to_string(record.epoch) +
                    (served_from_queue ? ", served from its queue" : ""));
}

void Agent::choose_winner(SourceWorkload& workload, const std::string& target, const std::string& why) {
  store::WorkloadRecord& record = workload.record;
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
  workload.pending_attempts = 0;
  workload.round_started = clock_.now();
  record_event(record.uid, "winner " + record.cluster + " (" + why + ")");
  send(target, protocol::Approve{record.uid, record.epoch});
  for (auto& [peer_id, progress] : workload.candidates) {
    if (peer_id != target && may_hold_something(progress)) cancel_at(workload, peer_id, record.epoch);
  }
}

void Agent::choose_best_ready(SourceWorkload& workload, const std::string& why) {
  const std::string* best = nullptr;
  double best_score = 0;
  std::string best_name;
  std::set<std::string> taken = sibling_winners(workload.record);
  for (const auto& [peer_id, progress] : workload.candidates) {
    if (progress.state != CandidateState::kReady || taken.count(peer_id)) continue;
    std::string name = cluster_name_of(peer_id);
    if (!best || progress.score > best_score || (progress.score == best_score && name < best_name)) {
      best = &peer_id;
      best_score = progress.score;
      best_name = name;
    }
  }
  if (!best) return;
  char score[32];
  std::snprintf(score, sizeof score, "%.1f", best_score);
  choose_winner(workload, *best, "best score " + std::string(score) + " of the READYs; " + why);
}

void Agent::adopt(SourceWorkload& workload, const std::string& target, uint64_t copy_epoch) {
  record_event(workload.record.uid,
               "the copy at " + cluster_name_of(target) +
                   (copy_epoch ? " (epoch " + std::to_string(copy_epoch) + ")" : std::string()) +
                   " still runs and nothing replaced it: adopting it");
  choose_winner(workload, target, "re-adopted");
}

void Agent::requeue_lost(SourceWorkload& workload, const std::string& why) {
  store::WorkloadRecord& record = workload.record;
  if (!record.winner.empty()) workload.lost_copies.emplace(record.winner, record.epoch);
  record.restarts += 1;
  record_event(record.uid, why + "; placing it again under a new epoch");
  workload.pending_attempts = 0;
  start_round(workload);  // persists the new round (or Pending), restarts included
  if (record.phase == model::Phase::kPending) {
    record.reason = why + "; " + record.reason;
    persist(record);
  }
}

void Agent::on_copy_failed(SourceWorkload& workload, protocol::CopyCondition condition) {
  store::WorkloadRecord& record = workload.record;
  // A fenced copy never finished its work: it is placed again whatever the
  // policy. Everything else (an exit code, an operator's delete, an
  // eviction) follows restartPolicy.
  bool fenced = condition == protocol::CopyCondition::kLeaseExpired;
  if (record.deleting || (!fenced && record.spec.restart_policy != model::RestartPolicy::kOnFailure)) {
    return;
  }
  record.restarts += 1;
  Duration wait = backoff(record.restarts - 1);
  record_event(record.uid, "restart " + std::to_string(record.restarts) + " in " +
                               format_duration(wait) +
                               (fenced ? " (its copy was fenced off)" : " (restartPolicy OnFailure)"));
  record.reason = "restarting after: " + record.reason;
  record.phase = model::Phase::kPending;
  record.winner.clear();
  record.cluster.clear();
  record.updated_at = clock_.now();
  persist(record);
  workload.next_round_at = clock_.now() + wait;
  record.restart_at = workload.next_round_at;
  persist(record);
}

void Agent::on_reject(const std::string& from, const protocol::Reject& message) {
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
  if (progress == workload->candidates.end() || progress->second.state == CandidateState::kRejected) {
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

void Agent::on_released(const std::string& from, const protocol::Released& message) {
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

void Agent::on_bound(const std::string& from, const protocol::Bound& message) {
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
}

void Agent::keep_outcome_of_lost_copy(SourceWorkload& workload, const std::string& from,
                                      const protocol::WorkloadStatus& message) {
  store::WorkloadRecord& record = workload.record;
  workload.lost_copies.clear();
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

void Agent::take_copy_status(SourceWorkload& workload, const protocol::WorkloadStatus& message) {
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

void Agent::on_status(const std::string& from, const protocol::WorkloadStatus& message) {
  // Acknowledge whatever we heard so the target stops repeating it.
  send(from, protocol::StatusAck{message.uid, message.epoch, message.generation});
  SourceWorkload* workload = find_source_workload(message.uid);
  if (!workload) return;
  store::WorkloadRecord& record = workload->record;
  // The outcome of a copy given up as lost, while no other copy runs (one
  // placed since may have failed or been fenced off): it ran within its
  // lease, so its result is the workload's. Placing it again would run the
  // work a second time.
  if (workload->lost_copies.count({from, message.epoch}) &&
      model::is_finished(message.phase) && !record.deleting &&
      (record.phase == model::Phase::kPending || record.phase == model::Phase::kPlacing) &&
      (record.winner.empty() || record.winner == from)) {
    keep_outcome_of_lost_copy(*workload, from, message);
    return;
  }
  if (record.winner != from || record.epoch != message.epoch ||
      message.generation <= record.status_generation || record.deleting) {
    return;  // another cluster, an older epoch, an older report, or on its way out
  }
  if (message.phase == model::Phase::kPending || message.phase == model::Phase::kPlacing) return;
  record.status_generation = message.generation;
  take_copy_status(*workload, message);
}

void Agent::on_revoke(const std::string& from, const protocol::Revoke& message) {
  auto it = accepted_.find(message.invitation_id);
  if (it == accepted_.end() || it->second.record.peer_id != from) return;  // not theirs to revoke
  OwnedInvitation& owned = it->second;
  if (owned.record.revoked) return;
  owned.record.revoked = true;
  note_store(store_.put_invitation(owned.record));
  record_event("peer/" + from, "invitation " + message.invitation_id + " revoked by " +
                                   cluster_name_of(from) +
                                   (message.evict ? "; our work there is being stopped" : ""));
  if (!may_send_as_target(from)) peers_[from].capacity.clear();  // nothing to place there any more
}

void Agent::on_holdings(const std::string& from, const protocol::Holdings& message) {
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
  // A copy we count as bound or running there, which the target does not hold.
  for (auto& [uid, workload] : workloads_) {
    const store::WorkloadRecord& record = workload.record;
    if (record.winner != from || held.count(uid) || record.deleting) continue;
    if (record.phase != model::Phase::kBound && record.phase != model::Phase::kRunning) continue;
    requeue_lost(workload, "LostAtTarget: " + record.cluster + " no longer holds epoch " +
                               std::to_string(record.epoch));
  }
}

void Agent::send_digests() {
  TimePoint now = clock_.now();
  Duration interval = config_.gc_interval;
  if (config_.lease.count() > 0) interval = std::min(interval, config_.lease / 4);
  for (auto& [id, peer] : peers_) {
    if (!ever_accepted_from(id) || now - peer.last_digest_sent < interval) continue;
    // Renewing a lease tells the target "I still see you".
    if (!may_renew_lease(id)) continue;
    protocol::Digest digest;
    digest.lease_ms = static_cast<uint64_t>(config_.lease.count());
    for (const auto& [uid, workload] : workloads_) {
      const store::WorkloadRecord& record = workload.record;
      if (record.winner == id && !model::is_finished(record.phase) && !record.deleting) {
        digest.copies.push_back({uid, record.epoch});
      }
    }
    peer.last_digest_sent = now;
    send(id, std::move(digest));
  }
}

Status Agent::nominate(const std::string& namespace_name, const std::string& name,
                       const std::vector<std::string>& clusters) {
  auto uid = uid_by_name_.find(namespace_name + "/" + name);
  if (uid == uid_by_name_.end()) {
    return not_found("workload " + namespace_name + "/" + name + " not found");
  }
  SourceWorkload& workload = workloads_.at(uid->second);
  store::WorkloadRecord& record = workload.record;
  if (record.spec.placement.dispatcher.value_or(config_.default_dispatcher) != model::Dispatcher::kExternal) {
    return invalid_argument("workload " + record.spec.key() +
                            " does not use spec.placement.dispatcher: External; nothing to nominate");
  }
  if (clusters.empty()) return invalid_argument("--clusters: expected at least one cluster name");
  size_t copies = static_cast<size_t>(record.spec.placement.number_of_clusters);
  if (clusters.size() < copies) {
    return invalid_argument("--clusters: expected at least " + std::to_string(copies) +
                            " cluster names (numberOfClusters " + std::to_string(copies) +
                            ", one copy per cluster)");
  }
  if (record.deleting) return invalid_argument("workload " + record.spec.key() + " is being deleted");
  bool bound = !record.winner.empty() || (record.phase != model::Phase::kPending &&
                                          record.phase != model::Phase::kPlacing);
  if (bound) {
    return invalid_argument("workload " + record.spec.key() + " is already bound at " + record.cluster +
                            "; nominations cannot change once bound");
  }
  std::vector<std::string> members = {record.uid};
  if (is_group(workload)) {
    members = copies_[record.uid];
    for (const auto& copy_uid : members) {
      const store::WorkloadRecord& copy = workloads_.at(copy_uid).record;
      if (!copy.winner.empty() || (copy.phase != model::Phase::kPending && copy.phase != model::Phase::kPlacing)) {
        return invalid_argument("workload " + record.spec.key() + " copy " +
                                std::to_string(copy.copy_index) + " is already bound at " +
                                copy.cluster + "; nominations cannot change once bound");
      }
    }
  }
  record.nominations = clusters;
  persist(record);
  std::string list;
  for (const auto& cluster : clusters) list += (list.empty() ? "" : ",") + cluster;
  record_event(record.uid, "nominated " + list);
  // A new round asks the nominees and cancels every candidate not nominated
  // any more.
  for (const auto& member_uid : members) {
    SourceWorkload& member = workloads_.at(member_uid);
    member.record.nominations = clusters;
    persist(member.record);
    start_round(member);
  }
  drain_local();
  return store_health_;
}

Status Agent::delete_workload(const std::string& namespace_name, const std::string& name) {
  auto uid = uid_by_name_.find(namespace_name + "/" + name);
  if (uid == uid_by_name_.end()) {
    return not_found("workload " + namespace_name + "/" + name + " not found");
  }
  SourceWorkload& workload = workloads_.at(uid->second);
  if (!workload.record.deleting) {
    std::string group_uid = workload.record.uid;
    workload.record.deleting = true;
    workload.record.reason = "Deleting";
    workload.record.updated_at = clock_.now();
    persist(workload.record);
    record_event(group_uid, "delete requested");
    // A group goes once its last copy has gone (drive_source_workloads).
    std::vector<std::string> targets = {group_uid};
    if (is_group(workload)) targets = copies_[group_uid];
    for (const auto& target_uid : targets) {
      SourceWorkload& one = workloads_.at(target_uid);
      one.record.deleting = true;
      one.record.reason = "Deleting";
      persist(one.record);
      begin_delete(one);
      if (drive_delete(one, clock_.now())) forget_workload(target_uid);
    }
    auto group = workloads_.find(group_uid);
    if (group != workloads_.end() && is_group(group->second) && copies_[group_uid].empty()) {
      forget_workload(group_uid);
    }
  }
  drain_local();
  return store_health_;
}

void Agent::begin_delete(SourceWorkload& workload) {
  const store::WorkloadRecord& record = workload.record;
  TimePoint now = clock_.now();
  std::set<std::string> maybe_holding;
  for (const auto& [peer_id, progress] : workload.candidates) {
    if (may_hold_something(progress)) maybe_holding.insert(peer_id);
  }
  for (const auto& [peer_id, cancel] : workload.cancels) maybe_holding.insert(peer_id);
  if (workload.candidates.empty() && record.phase != model::Phase::kPending) {
    // After a restart nobody knows who was asked: tell every target.
    maybe_holding.insert(self_id_);
    for (const auto& [id, owned] : accepted_) maybe_holding.insert(owned.record.peer_id);
  }
  if (!record.winner.empty()) maybe_holding.insert(record.winner);
  workload.cancels.clear();
  for (const auto& peer_id : maybe_holding) {
    PendingDelete pending{record.epoch, now, now + config_.reservation_ttl};
    // A copy that may be running is waited for until it is confirmed stopped.
    if (peer_id == record.winner && !model::is_finished(record.phase)) pending.give_up_at.reset();
    workload.deletes[peer_id] = pending;
    send(peer_id, protocol::Delete{record.uid, record.epoch});
  }
}

bool Agent::drive_delete(SourceWorkload& workload, TimePoint now) {
  for (auto it = workload.deletes.begin(); it != workload.deletes.end();) {
    PendingDelete& pending = it->second;
    if (pending.give_up_at && now >= *pending.give_up_at) {
      it = workload.deletes.erase(it);
      continue;
    }
    if (now - pending.last_sent >= config_.retry_interval) {
      pending.last_sent = now;
      send(it->first, protocol::Delete{workload.record.uid, pending.epoch});
    }
    ++it;
  }
  return workload.deletes.empty();
}

void Agent::forget_workload(const std::string& uid) {
  auto it = workloads_.find(uid);
  if (it == workloads_.end()) return;
  const std::string parent = it->second.record.parent;
  record_event(uid, "deleted " + it->second.record.spec.key());
  note_store(store_.delete_workload(uid));
  if (parent.empty()) {
    uid_by_name_.erase(it->second.record.spec.key());
    copies_.erase(uid);
  } else {
    std::erase(copies_[parent], uid);
    awake_.insert(parent);  // a deleting group goes once its last copy has
  }
  workloads_.erase(it);
  awake_.erase(uid);
}

void Agent::drive_source_workloads() {
  TimePoint now = clock_.now();
  std::vector<std::string> deleted;
  // Only the awake: a finished workload with nothing left to retry or
  // delete is skipped until something wakes it (wake()), so an idle agent
  // does not walk its whole history on every tick.
  std::vector<std::string> due(awake_.begin(), awake_.end());
  for (const std::string& uid : due) {
    auto found = workloads_.find(uid);
    if (found == workloads_.end()) {
      awake_.erase(uid);
      continue;
    }
    SourceWorkload& workload = found->second;
    drive_source_workload(uid, workload, now, deleted);
    if (is_quiet(workload)) awake_.erase(uid);
  }
  for (const auto& uid : deleted) forget_workload(uid);
}

bool Agent::is_quiet(const SourceWorkload& workload) {
  const store::WorkloadRecord& record = workload.record;
  if (record.deleting) return false;
  if (is_group(workload)) return true;  // its copies do the work; a delete wakes it
  return model::is_finished(record.phase) && workload.cancels.empty();
}

void Agent::drive_source_workload(const std::string& uid, SourceWorkload& workload, TimePoint now,
                                  std::vector<std::string>& deleted) {
  store::WorkloadRecord& record = workload.record;
  if (is_group(workload)) {
    // Its copies do the work; it goes once the last of them has been deleted.
    if (record.deleting && copies_[uid].empty()) deleted.push_back(uid);
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
    if (now - it->second.last_sent >= resend_after(it->second.resends)) {
      it->second.last_sent = now;
      it->second.resends += 1;
      send(it->first, protocol::Cancel{uid, it->second.epoch});
    }
    ++it;
  }
  if (record.phase == model::Phase::kPending) {
    if (now >= workload.next_round_at && now >= record.restart_at) start_round(workload);
    return;
  }
  if (!record.winner.empty() && record.winner != self_id_ && !model::is_finished(record.phase) &&
      lost(record.winner)) {
    // Fencing arithmetic (docs/lifecycle.md): renewals to a silent winner
    // stopped at least lease + skew ago, so its copy has stopped by now.
    auto winner = peers_.find(record.winner);
    TimePoint last_renewal = winner == peers_.end() ? TimePoint{} : winner->second.last_digest_sent;
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
    if (now - workload.last_approve_sent >= resend_after(workload.approve_resends) &&
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
        now - progress.last_sent >= resend_after(progress.resends)) {
      progress.last_sent = now;
      progress.resends += 1;
      send(peer_id, protocol::Candidate{uid, record.epoch, record.spec});
    }
  }
}

std::vector<store::WorkloadRecord> Agent::workloads() const {
  std::vector<store::WorkloadRecord> out;
  for (const auto& [uid, workload] : workloads_) {
    if (workload.record.parent.empty()) out.push_back(workload.record);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.spec.namespace_name, a.spec.name) <
           std::tie(b.spec.namespace_name, b.spec.name);
  });
  return out;
}

std::optional<store::WorkloadRecord> Agent::find_workload(const std::string& namespace_name,
                                                          const std::string& name) const {
  auto uid = uid_by_name_.find(namespace_name + "/" + name);
  if (uid == uid_by_name_.end()) return std::nullopt;
  return workloads_.at(uid->second).record;
}

std::vector<store::WorkloadRecord> Agent::copies_of(const std::string& uid) const {
  std::vector<store::WorkloadRecord> out;
  auto copies = copies_.find(uid);
  if (copies == copies_.end()) return out;
  for (const auto& copy_uid : copies->second) out.push_back(workloads_.at(copy_uid).record);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.copy_index < b.copy_index; });
  return out;
}

bool Agent::may_place_at(const store::WorkloadRecord& record, const std::string& target) const {
  // What a READY from `target` would have needed: a valid invitation into
  // the namespace, the allow list, the nominations, no sibling copy there.
  const model::PlacementSpec& placement = record.spec.placement;
  std::string cluster = cluster_name_of(target);
  bool invited = target == self_id_;
  for (const auto* invitation : valid_accepted(target)) {
    invited = invited || invitation->covers(record.spec.namespace_name);
  }
  auto listed = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), cluster) != names.end();
  };
  return invited && (placement.clusters.empty() || listed(placement.clusters)) &&
         (placement.dispatcher.value_or(config_.default_dispatcher) != model::Dispatcher::kExternal ||
          (record.nominations && listed(*record.nominations))) &&
         !sibling_winners(record).count(target);
}

std::set<std::string> Agent::sibling_winners(const store::WorkloadRecord& record) const {
  std::set<std::string> taken;
  if (record.parent.empty()) return taken;
  auto copies = copies_.find(record.parent);
  if (copies == copies_.end()) return taken;
  for (const auto& copy_uid : copies->second) {
    const store::WorkloadRecord& sibling = workloads_.at(copy_uid).record;
    // A finished sibling keeps its cluster: the group promises N distinct
    // clusters for its whole life, not only among the copies still running.
    // (A copy that restarts elsewhere has cleared its winner.)
    if (copy_uid != record.uid && !sibling.winner.empty()) taken.insert(sibling.winner);
  }
  return taken;
}

void Agent::update_group(const std::string& group_uid) {
  auto it = workloads_.find(group_uid);
  if (it == workloads_.end()) return;
  store::WorkloadRecord& group = it->second.record;
  std::vector<store::WorkloadRecord> copies = copies_of(group_uid);
  if (copies.empty()) return;
  auto count = [&](std::initializer_list<model::Phase> phases) {
    return static_cast<size_t>(std::count_if(copies.begin(), copies.end(), [&](const auto& copy) {
      return std::find(phases.begin(), phases.end(), copy.phase) != phases.end();
    }));
  };
  using model::Phase;
  size_t n = copies.size();
  // Running only when every copy runs (or has already succeeded); Failed as
  // soon as one copy failed for good; Succeeded when all did.
  Phase phase = Phase::kPending;
  if (count({Phase::kSucceeded}) == n) phase = Phase::kSucceeded;
  else if (count({Phase::kFailed}) > 0) phase = Phase::kFailed;
  else if (count({Phase::kRunning, Phase::kSucceeded}) == n) phase = Phase::kRunning;
  else if (count({Phase::kBound, Phase::kRunning, Phase::kSucceeded}) == n) phase = Phase::kBound;
  else if (count({Phase::kPlacing, Phase::kBound, Phase::kRunning, Phase::kSucceeded}) > 0) phase = Phase::kPlacing;
  std::string clusters, reasons;
  std::vector<std::string> nodes;
  uint64_t epoch = 0;
  int32_t restarts = 0, exit_code = 0;
  int64_t started = 0, finished = 0;
  bool all_finished = true;
  for (const auto& copy : copies) {
    if (!copy.cluster.empty()) clusters += (clusters.empty() ? "" : ",") + copy.cluster;
    if (!copy.reason.empty() && !copy.deleting) {
      reasons += "; copy " + std::to_string(copy.copy_index) + ": " + copy.reason;
    }
    nodes.insert(nodes.end(), copy.nodes.begin(), copy.nodes.end());
    epoch = std::max(epoch, copy.epoch);
    restarts += copy.restarts;
    if (exit_code == 0) exit_code = copy.exit_code;
    if (copy.started_at_ms && (!started || copy.started_at_ms < started)) started = copy.started_at_ms;
    finished = std::max(finished, copy.finished_at_ms);
    all_finished = all_finished && model::is_finished(copy.phase);
  }
  std::string summary = std::to_string(count({Phase::kRunning})) + "/" + std::to_string(n) + " running";
  if (phase == Phase::kSucceeded) summary = std::to_string(n) + "/" + std::to_string(n) + " succeeded";
  if (phase == Phase::kFailed) summary = std::to_string(count({Phase::kFailed})) + "/" + std::to_string(n) + " failed";
  if (group.deleting) summary = "Deleting";
  store::WorkloadRecord updated = group;
  updated.phase = phase;
  updated.cluster = clusters;
  updated.reason = summary + reasons;
  updated.nodes = std::move(nodes);
  updated.epoch = epoch;
  updated.restarts = restarts;
  updated.exit_code = exit_code;
  updated.started_at_ms = started;
  updated.finished_at_ms = all_finished ? finished : 0;
  if (updated.phase == group.phase && updated.cluster == group.cluster && updated.reason == group.reason &&
      updated.nodes == group.nodes && updated.epoch == group.epoch && updated.restarts == group.restarts &&
      updated.finished_at_ms == group.finished_at_ms && updated.started_at_ms == group.started_at_ms) {
    return;
  }
  bool phase_changed = updated.phase != group.phase;
  updated.updated_at = clock_.now();
  group = std::move(updated);
  persist(group);
  if (phase_changed) record_event(group_uid, std::string(model::phase_name(group.phase)) + ": " + group.reason);
}

}  // namespace shoal::core
