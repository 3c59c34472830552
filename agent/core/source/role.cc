// The source role: place each submitted workload on exactly one cluster.
// Here: submit, the placement window, and rounds — a CANDIDATE to each
// cluster its policy ranks (placement.cc), pending and parked work
// between rounds. The answers a round gets, and the winner, are in
// answers.cc.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <tuple>

#include "agent/core/source/role.h"
#include "common/check.h"

namespace shoal::core::source {

namespace {

// What this agent refuses at submit that the manifest's own checks cannot
// see: limits of its config, and what the wire can carry.
Status check_placeable(const model::WorkloadSpec& spec, const AgentConfig& config) {
  const model::PlacementSpec& p = spec.placement;
  if (p.ready_window >= config.reservation_ttl) {
    return invalid_argument("workload " + spec.key() +
                            " spec.placement.readyWindow: expected less than "
                            "reservationTTL (" +
                            format_duration(config.reservation_ttl) +
                            "), or the reservations expire before the window closes");
  }
  if (!p.clusters.empty() && static_cast<size_t>(p.number_of_clusters) > p.clusters.size()) {
    return invalid_argument("workload " + spec.key() +
                            " spec.placement.numberOfClusters: expected at most " +
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
    return invalid_argument("workload " + spec.key() + ": its spec takes " +
                            std::to_string(encoded) +
                            " bytes on the wire, more than a message may carry (" +
                            std::to_string(protocol::kMaxBodyBytes) + "); shorten metadata.labels");
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::string>> SourceRole::submit(const std::vector<model::WorkloadSpec>& specs) {
  std::set<std::string> named;
  for (const auto& spec : specs) {
    SHOAL_RETURN_IF_ERROR(check_placeable(spec, config_));
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
    // spec: the start timeout travels with each copy to its target (which
    // enforces it); the budget of disruptions stays here (which keeps it).
    if (record.spec.start_timeout.count() == 0) record.spec.start_timeout = config_.start_timeout;
    if (record.spec.max_disruptions < 0) record.spec.max_disruptions = config_.max_disruptions;
    record.phase = model::Phase::kPending;
    record.created_at = now;
    record.updated_at = now;
    uids.push_back(record.uid);
    int32_t copies = spec.placement.number_of_clusters;
    SourceWorkload& stored = book_.add(std::move(workload));
    persist(stored.record);
    context_.record_event(
        stored.record.uid,
        "submitted " + spec.key() + " (" + std::to_string(spec.replicas) + " x " +
            spec.resources.to_string() + ")" +
            (copies > 1 ? ", one copy on each of " + std::to_string(copies) + " clusters" : ""));
    if (copies == 1) {
      start_round(stored);
      continue;
    }
    // A group: each copy is placed like a workload of its own, under the
    // group's name, never on a cluster where a sibling runs.
    // Each copy starts from the group as submitted, Pending: the group's
    // record follows its copies (Placing once the first round starts), and a
    // copy that began Placing would skip its own quota check.
    const store::WorkloadRecord submitted = stored.record;
    std::string group_uid = submitted.uid;
    for (int32_t index = 1; index <= copies; ++index) {
      SourceWorkload copy;
      copy.record = submitted;
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

void SourceRole::wait_for_slot(SourceWorkload& workload) {
  wait_in_line(workload, PlacementWindow::kSlotLine,
               "WaitingForSlot: " + std::to_string(config_.placement_window) +
                   " workloads are being placed (placementWindow)");
}

void SourceRole::wait_in_line(SourceWorkload& workload, std::string_view line, const std::string& reason) {
  store::WorkloadRecord& record = workload.record;
  if (workload.waiting_ticket != 0) return;
  if (record.phase != model::Phase::kPending || record.reason != reason) {
    record.phase = model::Phase::kPending;
    record.reason = reason;
    record.updated_at = clock_.now();
    persist(record);
  }
  window_.join(workload, line);
  // Room cannot help what waits in a line; its round, once admitted, can
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
  // Beyond its namespace's quota it is sent nowhere.
  if (held_by_quota(workload)) return;
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
  // Exactly once: a target approved in advance is the epoch's winner from
  // here on, in the batch that commits before its CANDIDATE leaves.
  bool approved = approves_in_advance(workload, targets);
  record.epoch += 1;
  record.phase = model::Phase::kPlacing;
  record.reason.clear();
  record.winner = approved ? targets.ranked.front().first : "";
  record.cluster = approved ? context_.cluster_name_of(record.winner) : "";
  record.updated_at = now;
  record.status_generation = 0;  // a new copy counts its own generations
  persist(record);
  workload.round_started = now;
  workload.wave_started = now;
  workload.asked_preferred_alone =
      dispatcher_of(record, config_) == model::Dispatcher::kPreferred && !workload.untried.empty();
  workload.approved_in_advance = approved;
  if (approved) {
    // Until it answers, its CANDIDATE stands for an APPROVE: re-sent as one.
    workload.last_approve_sent = now;
    workload.approve_resends = 0;
  }
  std::string names;
  for (const auto& [peer_id, name] : targets.ranked) {
    names += (names.empty() ? "" : ", ") + name;
    workload.candidates[peer_id] = {CandidateState::kSent, protocol::RejectCode::kOther, "", now};
  }
  workload.engine_scores = std::move(targets.engine_score);  // Incremental's later batches too
  // The first-ranked is where this workload counts until its target says
  // otherwise, and whose READY the others wait for (preferredWait).
  workload.preferred = targets.ranked.front().first;
  targets_.follow(workload);
  context_.record_event(
      record.uid, "epoch " + std::to_string(record.epoch) + ": candidates " + names +
                      (workload.untried.empty()
                           ? ""
                           : " (" + std::to_string(workload.untried.size()) + " more later)") +
                      "; ranked " + targets.decision +
                      (approved ? "; approved in advance: it binds if it has room" : ""));
  for (const auto& [peer_id, name] : targets.ranked) {
    protocol::Candidate candidate{record.uid, record.epoch, record.spec, approved};
    if (approved) {
      leases_.send_binding(peer_id, std::move(candidate));
    } else {
      context_.send(peer_id, std::move(candidate));
    }
  }
}

SourceRole::RankedTargets SourceRole::round_targets(
    const SourceWorkload& workload, std::vector<std::pair<std::string, std::string>>* untried) {
  const store::WorkloadRecord& record = workload.record;
  RankedTargets targets = rank_targets(record);
  // The dispatcher decides who hears of it now: the first-ranked alone while
  // it has room, the rest later (Preferred), everyone (AllAtOnce), the d*N
  // best (Sample), or the best k with k more per round (Incremental).
  const model::PlacementSpec& placement = record.spec.placement;
  model::Dispatcher dispatcher = dispatcher_of(record, config_);
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
                                     context_.cluster_name_of(target.first)) == nominated->end();
    });
    if (!nominated) targets.reason = " waiting for nominations (shoalctl nominate)";
  } else if (dispatcher == model::Dispatcher::kIncremental ||
             (dispatcher == model::Dispatcher::kPreferred &&
              asks_preferred_alone(workload, targets.queueing, config_))) {
    size_t batch = dispatcher == model::Dispatcher::kPreferred ? 1 : incremental_batch(record);
    if (targets.ranked.size() > batch) {
      untried->assign(targets.ranked.begin() + static_cast<std::ptrdiff_t>(batch),
                      targets.ranked.end());
      targets.ranked.resize(batch);
    }
  }
  return targets;
}

bool SourceRole::approves_in_advance(const SourceWorkload& workload, const RankedTargets& targets) const {
  if (targets.ranked.size() != 1 || targets.queueing) return false;
  const std::string& target = targets.ranked.front().first;
  const store::WorkloadRecord& record = workload.record;
  return target != self_id_ && !is_group(workload) && record.parent.empty() && !record.deleting &&
         record.spec.placement.ready_window.count() == 0 &&
         leases_.silent_for(target) < config_.retry_interval / 5 && leases_.may_renew(target);
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
    context_.send(peer_id, protocol::Candidate{record.uid, record.epoch, record.spec});
  }
  workload.next_round_at = clock_.now() + backoff(workload.pending_attempts, config_);
  workload.pending_attempts += 1;  // to pendingRetryMax, well inside queueHold
  parked_.park(workload);
  return true;
}

void SourceRole::ask_next_batch(SourceWorkload& workload) {
  store::WorkloadRecord& record = workload.record;
  TimePoint now = clock_.now();
  // Incremental asks the next incrementalBatch; Preferred, everyone left.
  size_t count = workload.untried.size();
  if (dispatcher_of(record, config_) == model::Dispatcher::kIncremental) {
    count = std::min(count, incremental_batch(record));
  }
  std::string names;
  for (size_t i = 0; i < count; ++i) {
    const auto& [peer_id, name] = workload.untried[i];
    names += (names.empty() ? "" : ", ") + name;
    workload.candidates[peer_id] = {CandidateState::kSent, protocol::RejectCode::kOther, "", now};
    context_.send(peer_id, protocol::Candidate{record.uid, record.epoch, record.spec});
  }
  workload.untried.erase(workload.untried.begin(), workload.untried.begin() + static_cast<std::ptrdiff_t>(count));
  workload.wave_started = now;
  context_.record_event(record.uid,
                        "epoch " + std::to_string(record.epoch) + ": more candidates " + names);
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
  workload.next_round_at = clock_.now() + backoff(workload.pending_attempts, config_);
  workload.pending_attempts += 1;
  if (changed) {
    persist(record);
    context_.record_event(record.uid, "pending: " + reason);
  }
  if (waits_in_every_queue(workload)) {
    room_waiters_.erase(record.uid);
    parked_.park(workload);
  } else {
    room_waiters_.insert(record.uid);
  }
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
  context_.send(peer_id, protocol::Cancel{workload.record.uid, epoch});
}

}  // namespace shoal::core::source
