// The target role: answer CANDIDATE with a reservation (READY) or a reason
// (REJECT); bind on APPROVE; release on CANCEL or when the reservation
// expires; report every status change until the source acknowledges it.
#include <algorithm>
#include <limits>
#include <set>

#include "agent/core/agent.h"

namespace shoal::core {
namespace {

std::string cluster_key(const std::string& source, const std::string& uid) {
  return source + "/" + uid;
}

model::Phase to_phase(store::ReservationPhase phase) {
  switch (phase) {
    case store::ReservationPhase::kReserved: return model::Phase::kPlacing;
    case store::ReservationPhase::kBound: return model::Phase::kBound;
    case store::ReservationPhase::kRunning: return model::Phase::kRunning;
    case store::ReservationPhase::kSucceeded: return model::Phase::kSucceeded;
    case store::ReservationPhase::kFailed: return model::Phase::kFailed;
  }
  return model::Phase::kFailed;
}

}  // namespace

Agent::Refusal Agent::reject_reason_for(const std::string& from,
                                        const model::WorkloadSpec& spec) const {
  if (from == self_id_) return {};
  // The most telling reason among the invitations that name this namespace.
  Refusal best{protocol::RejectCode::kNotInvited, "NotInvited"};
  TimePoint now = clock_.now();
  for (const auto& [id, owned] : issued_) {
    if (owned.record.peer_id != from || !owned.invitation.covers(spec.namespace_name)) continue;
    InvitationState state = invitation_state(owned, now);
    if (state == InvitationState::kActive) return limit_refusal(from, spec);
    if (state == InvitationState::kReplaced) continue;  // its successor decides
    if (best.code == protocol::RejectCode::kNotInvited || state == InvitationState::kRevoked) {
      best = {protocol::RejectCode::kInvitationNotValid, invitation_state_name(state)};
    }
  }
  return best;
}

Agent::Refusal Agent::limit_refusal(const std::string& from,
                                    const model::WorkloadSpec& spec) const {
  if (from == self_id_) return {};
  const crypto::InvitationLimits* limits = nullptr;
  for (const auto* invitation : valid_issued(from)) limits = &invitation->limits;
  if (!limits) return {protocol::RejectCode::kNotInvited, "NotInvited"};
  InvitationUsage usage = usage_of_source(from);
  model::Resources after = usage.resources + spec.total();
  auto over = [](const char* resource) {
    return Refusal{protocol::RejectCode::kQuotaExceeded, std::string("QuotaExceeded:") + resource};
  };
  if (limits->cpu_milli && after.cpu_milli > *limits->cpu_milli) return over("cpu");
  if (limits->memory_bytes && after.memory_bytes > *limits->memory_bytes) return over("memory");
  if (limits->gpu && after.gpu > *limits->gpu) return over("gpu");
  if (limits->workloads && usage.workloads + 1 > *limits->workloads) return over("workloads");
  return {};
}

void Agent::reject_candidate(const std::string& from, const protocol::Candidate& message,
                             const Refusal& refusal) {
  // Counted per reason text for `shoalctl status`: the text names the
  // resource or queue, which is what an operator needs to see.
  ++stats_.rejected[refusal.reason];
  if (from != self_id_) {
    record_event("peer/" + from,
                 "rejected candidate " + message.spec.key() + ": " + refusal.reason);
  }
  send(from, protocol::Reject{message.uid, message.epoch, refusal.reason, refusal.code});
}

void Agent::withdraw_from_source(const std::string& source, const std::string& why, bool evict) {
  std::erase_if(queued_, [&](const auto& entry) { return entry.first.first == source; });
  std::vector<ReservationKey> unapproved;
  for (auto& [key, reservation] : reservations_) {
    if (key.first != source) continue;
    store::ReservationRecord& record = reservation.record;
    if (record.phase == store::ReservationPhase::kReserved) {
      unapproved.push_back(key);
    } else if (evict && store::holds_resources(record.phase)) {
      record_event(record.uid, "evicted at " + config_.cluster + ": " + why);
      fail_copy(reservation, protocol::CopyCondition::kRevoked, "Revoked", clock_.now());
    }
  }
  for (const auto& key : unapproved) release_reservation(key, why);
}

void Agent::fail_copy(TargetReservation& reservation, protocol::CopyCondition condition,
                      const std::string& why, TimePoint at) {
  store::ReservationRecord& record = reservation.record;
  cluster_.release(cluster_key(record.source, record.uid));
  record.phase = store::ReservationPhase::kFailed;
  record.message = why;
  record.condition = static_cast<uint8_t>(condition);
  record.exit_code = -1;
  record.finished_at_ms = to_millis(at);
  record.generation += 1;
  persist(record);
  send_status(reservation);
  capacity_changed_ = true;
}

void Agent::on_candidate(const std::string& from, const protocol::Candidate& message) {
  ReservationKey key{from, message.uid};
  auto it = reservations_.find(key);
  if (it != reservations_.end()) {
    store::ReservationRecord& existing = it->second.record;
    if (message.epoch < existing.epoch) {
      send(from, protocol::Reject{message.uid, message.epoch, "StaleEpoch",
                                  protocol::RejectCode::kStaleEpoch});
      return;
    }
    if (message.epoch == existing.epoch) {
      // A retry: answer the same again.
      send(from, protocol::Ready{message.uid, message.epoch, 0});
      return;
    }
    if (existing.phase == store::ReservationPhase::kBound ||
        existing.phase == store::ReservationPhase::kRunning) {
      // The source re-places a workload we still run; never run it twice.
      send(from, protocol::Reject{message.uid, message.epoch, "AlreadyBound",
                                  protocol::RejectCode::kAlreadyBound});
      return;
    }
    // An older epoch that was only reserved, or has finished: superseded.
    release_reservation(key, "superseded by epoch " + std::to_string(message.epoch));
  }

  if (Refusal refusal = reject_reason_for(from, message.spec); refusal) {
    queued_.erase(key);
    reject_candidate(from, message, refusal);
    return;
  }
  TimePoint now = clock_.now();
  auto queued = queued_.find(key);
  if (queued != queued_.end()) {
    if (message.epoch < queued->second.epoch) {
      send(from, protocol::Reject{message.uid, message.epoch, "StaleEpoch",
                                  protocol::RejectCode::kStaleEpoch});
      return;
    }
    // A retry or a new round of a waiting candidate: it keeps its place in line.
    queued->second.epoch = message.epoch;
    queued->second.spec = message.spec;
    queued->second.hold_until = now + config_.queue_hold;
  } else {
    // What can never fit here is refused for good rather than queued.
    Status fits = cluster_.fits_when_idle(message.spec);
    if (!fits.is_ok()) {
      reject_candidate(from, message, {protocol::RejectCode::kNeverFits, fits.message()});
      return;
    }
    queued_[key] = {message.epoch, message.spec, ++arrivals_, now + config_.queue_hold};
  }
  // The newcomer is served together with whatever already waits, so it
  // cannot overtake work the scheduler ranks ahead of it.
  std::map<ReservationKey, std::string> waiting = serve_queue();
  auto still = waiting.find(key);
  if (still != waiting.end()) {
    // "NoCapacity:" tells the source the candidate waits here: a READY for
    // this epoch may follow when room frees (protocol/README.md).
    reject_candidate(from, message,
                     {protocol::RejectCode::kNoCapacity, "NoCapacity:" + still->second});
  }
}

std::map<Agent::ReservationKey, std::string> Agent::serve_queue() {
  std::map<ReservationKey, std::string> waiting;
  if (queued_.empty()) return waiting;
  std::vector<std::pair<uint64_t, ReservationKey>> order;
  order.reserve(queued_.size());
  for (const auto& [key, entry] : queued_) order.emplace_back(entry.arrival, key);
  std::sort(order.begin(), order.end());
  std::vector<cluster::ScheduleRequest> requests;
  requests.reserve(order.size());
  for (const auto& [arrival, key] : order) {
    requests.push_back({cluster_key(key.first, key.second), queued_.at(key).spec});
  }
  std::vector<cluster::WorkloadDecision> decisions = cluster_.reserve_in_fair_share_order(requests);
  for (size_t i = 0; i < order.size(); ++i) {
    const ReservationKey& key = order[i].second;
    if (!decisions[i].admitted) {
      waiting[key] = decisions[i].reason;
      continue;
    }
    QueuedCandidate entry = std::move(queued_.at(key));
    queued_.erase(key);
    // The invitation may have expired while it waited, and several
    // candidates of one source admitted together could overrun its limits:
    // each is checked again against what is already reserved.
    if (Refusal refusal = reject_reason_for(key.first, entry.spec); refusal) {
      cluster_.release(cluster_key(key.first, key.second));
      reject_candidate(key.first, {key.second, entry.epoch, entry.spec}, refusal);
      continue;
    }
    reserve_for(key, entry.epoch, entry.spec, std::move(decisions[i].nodes));
  }
  return waiting;
}

void Agent::reserve_for(const ReservationKey& key, uint64_t epoch, const model::WorkloadSpec& spec,
                        std::vector<std::string> nodes) {
  TargetReservation reservation;
  store::ReservationRecord& record = reservation.record;
  record.source = key.first;
  record.uid = key.second;
  record.epoch = epoch;
  record.spec = spec;
  record.phase = store::ReservationPhase::kReserved;
  record.nodes = std::move(nodes);
  record.expires_at = clock_.now() + config_.reservation_ttl;
  next_reservation_expiry_ = std::min(next_reservation_expiry_, record.expires_at);
  persist(record);
  capacity_changed_ = true;
  reservations_[key] = std::move(reservation);
  // Score: how much cpu stays free here, 0..100; higher is a roomier fit.
  cluster::CapacitySummary summary = cluster_.capacity();
  int64_t total_cpu = 0;
  for (const auto& node : cluster_.nodes()) total_cpu += node.capacity.cpu_milli;
  double score = total_cpu > 0 ? 100.0 * static_cast<double>(summary.free.cpu_milli) /
                                     static_cast<double>(total_cpu)
                               : 0.0;
  send(key.first, protocol::Ready{key.second, epoch, score});
}

void Agent::on_approve(const std::string& from, const protocol::Approve& message) {
  ReservationKey key{from, message.uid};
  auto it = reservations_.find(key);
  // A copy that finished since the source decided to adopt it is adopted
  // all the same: its outcome is the workload's (only a reservation that
  // never bound cannot be).
  bool adoptable = it != reservations_.end() && from != self_id_ &&
                   it->second.record.phase != store::ReservationPhase::kReserved;
  if (it == reservations_.end() || (it->second.record.epoch < message.epoch && !adoptable)) {
    send(from, protocol::Reject{message.uid, message.epoch, "ReservationExpired",
                                protocol::RejectCode::kReservationExpired});
    return;
  }
  TargetReservation& reservation = it->second;
  store::ReservationRecord& record = reservation.record;
  if (record.epoch > message.epoch) return;  // an old round's approval; the source moved on
  // An APPROVE that binds (or adopts) answers a READY the source just heard
  // from us: it renews the source's lease, so a copy bound after a lapse is
  // not stopped at once. Retries of an APPROVE never renew: a source may
  // repeat them to a target it no longer hears (docs/lifecycle.md).
  if (adoptable && record.epoch < message.epoch) {
    renew_lease(from);
    // Adoption: the source lost track of this copy, has not placed it
    // anywhere else, and takes it back under its current epoch. Still one
    // copy: the source approves one winner per epoch.
    record_event(record.uid, "adopted by " + cluster_name_of(from) + " under epoch " +
                                 std::to_string(message.epoch) + " (was " +
                                 std::to_string(record.epoch) + ")");
    record.epoch = message.epoch;
    record.generation += 1;
    persist(record);
    send(from, protocol::Bound{record.uid, record.epoch, record.nodes});
    send_status(reservation);
    return;
  }
  if (record.phase != store::ReservationPhase::kReserved) {
    // A retry, or a source that re-adopts this copy under the same epoch:
    // it needs the copy's status again, which generation numbers make safe.
    send(from, protocol::Bound{record.uid, record.epoch, record.nodes});
    send_status(reservation);
    return;
  }
  TimePoint now = clock_.now();
  if (record.expires_at <= now) {
    release_reservation(key, "reservation expired before approval");
    send(from, protocol::Reject{message.uid, message.epoch, "ReservationExpired",
                                protocol::RejectCode::kReservationExpired});
    return;
  }
  renew_lease(from);  // before binding: a lapse stops only what ran before it
  Status started = cluster_.start(cluster_key(from, record.uid), now, record.spec.duration,
                                  record.spec.exit_code);
  if (!started.is_ok()) {
    release_reservation(key, "could not start: " + started.message());
    send(from, protocol::Reject{message.uid, message.epoch, "StartFailed",
                                protocol::RejectCode::kStartFailed});
    return;
  }
  record.phase = store::ReservationPhase::kBound;
  record.started_at_ms = to_millis(now);
  record.generation += 1;
  persist(record);
  record_event(record.uid, "bound for " + cluster_name_of(from) + " on " +
                               (record.nodes.empty() ? "" : record.nodes.front()) +
                               (record.nodes.size() > 1 ? " and others" : ""));
  send(from, protocol::Bound{record.uid, record.epoch, record.nodes});
  send_status(reservation);
}

bool Agent::withdraw(const ReservationKey& key, uint64_t epoch, bool stop_bound) {
  auto queued = queued_.find(key);
  if (queued != queued_.end() && queued->second.epoch <= epoch) queued_.erase(queued);
  auto it = reservations_.find(key);
  if (it == reservations_.end() || it->second.record.epoch > epoch) return true;
  bool bound = it->second.record.phase == store::ReservationPhase::kBound ||
               it->second.record.phase == store::ReservationPhase::kRunning;
  if (bound && !stop_bound) return false;
  release_reservation(key, bound ? "stopped: deleted by its source"
                                 : stop_bound ? "deleted by its source" : "cancelled by source");
  return true;
}

void Agent::on_cancel(const std::string& from, const protocol::Cancel& message) {
  // CANCEL withdraws candidates and reservations only; bound work is stopped
  // by DELETE, never by a (possibly stale) CANCEL, and gets no RELEASED.
  if (withdraw({from, message.uid}, message.epoch, /*stop_bound=*/false)) {
    send(from, protocol::Released{message.uid, message.epoch});
  }
}

void Agent::on_delete(const std::string& from, const protocol::Delete& message) {
  withdraw({from, message.uid}, message.epoch, /*stop_bound=*/true);
  send(from, protocol::Released{message.uid, message.epoch});
}

void Agent::on_digest(const std::string& from, const protocol::Digest& message) {
  if (from == self_id_) return;
  Peer& source = peers_[from];
  // A lease is minutes; a day bounds what a confused or hostile peer can ask
  // for (and keeps the arithmetic below far from overflow).
  constexpr uint64_t kLongestLeaseMs = 24ull * 3600 * 1000;
  source.lease_ms = static_cast<int64_t>(std::min(message.lease_ms, kLongestLeaseMs));
  if (message.lease_ms == 0) {
    source.lease_until_ms = 0;  // the source runs without fencing
    persist_peer(from);
  } else {
    renew_lease(from);
  }
  // Garbage collection: a finished copy whose last status the source has
  // acknowledged, and which the source no longer counts as held here, is
  // done with.
  std::set<std::pair<std::string, uint64_t>> listed;
  for (const auto& copy : message.copies) listed.emplace(copy.uid, copy.epoch);
  std::vector<ReservationKey> collected;
  protocol::Holdings holdings;
  for (const auto& [key, reservation] : reservations_) {
    if (key.first != from) continue;
    const store::ReservationRecord& record = reservation.record;
    if (record.phase == store::ReservationPhase::kReserved) continue;
    bool finished = !store::holds_resources(record.phase);
    if (finished && record.acked_generation >= record.generation &&
        !listed.count({record.uid, record.epoch})) {
      collected.push_back(key);
      continue;
    }
    holdings.copies.push_back({record.uid, record.epoch, to_phase(record.phase)});
  }
  for (const auto& key : collected) forget_reservation(key);
  send(from, std::move(holdings));
}

void Agent::renew_lease(const std::string& source_id) {
  auto source = peers_.find(source_id);
  if (source == peers_.end() || source->second.lease_ms <= 0) return;
  Peer& peer = source->second;
  // A lease that lapsed before this renewal was sent is never revived: the
  // source counts its copies here stopped since the lapse and may have
  // placed them elsewhere (a source that wakes from a pause renews at once).
  // So first what finished before the lapse is taken, and what still ran
  // then is stopped as of the lapse; only then does the lease go on.
  if (peer.lease_until_ms > 0 && to_millis(current_sent_at_) >= peer.lease_until_ms) {
    apply_cluster_events();
    enforce_leases();
  }
  peer.lease_until_ms = std::max(peer.lease_until_ms, to_millis(current_sent_at_) + peer.lease_ms);
  persist_peer(source_id);
}

std::optional<TimePoint> Agent::lease_end_of(const std::string& source_id) const {
  if (source_id == self_id_) return std::nullopt;
  auto source = peers_.find(source_id);
  if (source == peers_.end() || source->second.lease_ms == 0) return std::nullopt;
  return from_millis(source->second.lease_until_ms);
}

void Agent::enforce_leases() {
  TimePoint now = clock_.now();
  // Leases are per source, and sources are few: find the lapsed ones, then
  // visit only their reservations (reservations_ is ordered by source).
  for (const auto& [source_id, peer] : peers_) {
    std::optional<TimePoint> ends = lease_end_of(source_id);
    if (!ends || *ends > now) continue;
    for (auto it = reservations_.lower_bound({source_id, ""});
         it != reservations_.end() && it->first.first == source_id; ++it) {
      fence_copy(it->first, it->second, *ends);
    }
  }
}

void Agent::fence_copy(const ReservationKey& key, TargetReservation& reservation,
                       TimePoint lease_end) {
  store::ReservationRecord& record = reservation.record;
  if (record.phase != store::ReservationPhase::kBound &&
      record.phase != store::ReservationPhase::kRunning) {
    return;
  }
  // The copy stops as of the lease's end: that is the moment the source
  // relies on (a target frozen past it stops the copy on waking, dated then).
  record_event(record.uid, "stopped at " + config_.cluster + ": the lease of " +
                               cluster_name_of(key.first) + " ended at " + format_time(lease_end));
  fail_copy(reservation, protocol::CopyCondition::kLeaseExpired,
            "LeaseExpired: no renewal from " + cluster_name_of(key.first), lease_end);
}

void Agent::collect_local_garbage() {
  // Copies of other sources are collected through their digests; our own
  // cluster's copies are acknowledged in the batch they finish in.
  std::vector<ReservationKey> collected;
  for (const auto& [key, reservation] : reservations_) {
    const store::ReservationRecord& record = reservation.record;
    if (key.first == self_id_ && !store::holds_resources(record.phase) &&
        record.acked_generation >= record.generation) {
      collected.push_back(key);
    }
  }
  for (const auto& key : collected) forget_reservation(key);
}

void Agent::forget_reservation(const ReservationKey& key) {
  note_store(store_.delete_reservation(key.first, key.second));
  reservations_.erase(key);
}

Status Agent::stop_hosted(const std::string& namespace_name, const std::string& name,
                          const std::string& from_cluster) {
  std::string key = namespace_name + "/" + name;
  std::vector<TargetReservation*> matches;
  std::string sources;
  for (auto& [rkey, reservation] : reservations_) {
    const store::ReservationRecord& record = reservation.record;
    if (rkey.first == self_id_ || record.spec.key() != key) continue;
    if (!from_cluster.empty() && cluster_name_of(rkey.first) != from_cluster) continue;
    if (!store::holds_resources(record.phase)) continue;
    matches.push_back(&reservation);
    sources += (sources.empty() ? "" : ", ") + cluster_name_of(rkey.first);
  }
  if (matches.empty()) {
    return not_found("workload " + key + " not found" +
                     (from_cluster.empty() ? "" : " from " + from_cluster) +
                     " (neither submitted here nor running here for another cluster)");
  }
  if (matches.size() > 1) {
    return invalid_argument("workload " + key + " runs here for several clusters (" + sources +
                            "); say which with --from CLUSTER");
  }
  TargetReservation& reservation = *matches.front();
  ReservationKey rkey{reservation.record.source, reservation.record.uid};
  if (reservation.record.phase == store::ReservationPhase::kReserved) {
    uint64_t epoch = reservation.record.epoch;
    release_reservation(rkey, "deleted by the operator of " + config_.cluster);
    send(rkey.first, protocol::Reject{rkey.second, epoch, "DeletedAtTarget",
                                      protocol::RejectCode::kDeletedAtTarget});
  } else {
    record_event(rkey.second, "deleted at " + config_.cluster + " by its operator");
    fail_copy(reservation, protocol::CopyCondition::kDeletedAtTarget,
              "DeletedAtTarget: by the operator of " + config_.cluster, clock_.now());
  }
  drain_local();
  return store_health_;
}

void Agent::on_status_ack(const std::string& from, const protocol::StatusAck& message) {
  auto it = reservations_.find({from, message.uid});
  if (it == reservations_.end()) return;
  store::ReservationRecord& record = it->second.record;
  if (record.epoch != message.epoch || message.generation <= record.acked_generation) return;
  record.acked_generation = std::min(message.generation, record.generation);
  persist(record);
}

void Agent::release_reservation(const ReservationKey& key, const std::string& why) {
  auto it = reservations_.find(key);
  if (it == reservations_.end()) return;
  cluster_.release(cluster_key(key.first, key.second));
  store::ReservationRecord& record = it->second.record;
  if (store::holds_resources(record.phase)) {
    record_event(key.second, "released at " + config_.cluster + ": " + why);
  }
  if (record.phase == store::ReservationPhase::kBound ||
      record.phase == store::ReservationPhase::kRunning) {
    // The run history keeps a run only through its last persisted phase:
    // end it before the reservation goes.
    record.phase = store::ReservationPhase::kFailed;
    record.finished_at_ms = to_millis(clock_.now());
    record.exit_code = -1;
    record.message = "Released: " + why;
    record.condition = static_cast<uint8_t>(protocol::CopyCondition::kReleased);
    persist(record);
  }
  forget_reservation(key);
  capacity_changed_ = true;
}

void Agent::send_status(TargetReservation& reservation) {
  const store::ReservationRecord& record = reservation.record;
  if (record.generation == reservation.generation_sent) {
    reservation.status_resends += 1;
  } else {
    reservation.generation_sent = record.generation;
    reservation.status_resends = 0;
  }
  protocol::WorkloadStatus status;
  status.uid = record.uid;
  status.epoch = record.epoch;
  status.generation = record.generation;
  status.phase = to_phase(record.phase);
  status.nodes = record.nodes;
  status.started_at_ms = record.started_at_ms;
  status.finished_at_ms = record.finished_at_ms;
  status.exit_code = record.exit_code;
  status.message = record.message;
  status.condition = record.condition < std::size(protocol::kCopyConditionNames)
                         ? static_cast<protocol::CopyCondition>(record.condition)
                         : protocol::CopyCondition::kOther;
  reservation.last_status_sent = clock_.now();
  next_status_retry_ =
      std::min(next_status_retry_, reservation.last_status_sent + config_.retry_interval);
  send(record.source, std::move(status));
}

void Agent::apply_cluster_events() {
  // Changes that land in one tick are coalesced: one STATUS per copy, with
  // its newest state and generation.
  std::set<ReservationKey> changed;
  for (const auto& event : cluster_.drain_events(clock_.now())) {
    size_t slash = event.key.find('/');
    if (slash == std::string::npos) continue;
    ReservationKey key{event.key.substr(0, slash), event.key.substr(slash + 1)};
    auto it = reservations_.find(key);
    if (it == reservations_.end()) continue;
    store::ReservationRecord& record = it->second.record;
    // A copy whose source's lease ended before this event had stopped by
    // then: a target frozen (or down) past the lease learns of its jobs'
    // later starts and finishes only on waking, and must not report them.
    // enforce_leases, next in the tick, stops the copy as of the lease's end.
    if (std::optional<TimePoint> lease_end = lease_end_of(key.first); lease_end && *lease_end <= event.at) {
      continue;
    }
    switch (event.kind) {
      case cluster::WorkloadEventKind::kStarted:
        if (record.phase != store::ReservationPhase::kBound) continue;
        record.phase = store::ReservationPhase::kRunning;
        break;
      case cluster::WorkloadEventKind::kSucceeded:
      case cluster::WorkloadEventKind::kFailed:
        if (!store::holds_resources(record.phase)) continue;
        record.phase = event.kind == cluster::WorkloadEventKind::kSucceeded
                           ? store::ReservationPhase::kSucceeded
                           : store::ReservationPhase::kFailed;
        record.finished_at_ms = to_millis(event.at);
        record.exit_code = event.exit_code;
        record.message = event.message;
        capacity_changed_ = true;
        break;
    }
    record.generation += 1;
    persist(record);
    record_event(record.uid, "at " + config_.cluster + ": " +
                                 std::string(store::kReservationPhaseNames[static_cast<int>(
                                     record.phase)]));
    changed.insert(key);
  }
  for (const auto& key : changed) send_status(reservations_.at(key));
}

void Agent::expire_reservations() {
  TimePoint now = clock_.now();
  if (now >= next_reservation_expiry_) {
    std::vector<ReservationKey> expired;
    next_reservation_expiry_ = TimePoint::max();
    for (const auto& [key, reservation] : reservations_) {
      if (reservation.record.phase != store::ReservationPhase::kReserved) continue;
      if (reservation.record.expires_at <= now) {
        expired.push_back(key);
      } else {
        next_reservation_expiry_ =
            std::min(next_reservation_expiry_, reservation.record.expires_at);
      }
    }
    for (const auto& key : expired) release_reservation(key, "reservation expired unapproved");
  }
  // A queued candidate whose source stopped asking has been placed elsewhere
  // or given up; forget it.
  std::erase_if(queued_, [&](const auto& entry) { return entry.second.hold_until <= now; });
}

void Agent::retry_status_reports() {
  TimePoint now = clock_.now();
  if (now < next_status_retry_) return;
  next_status_retry_ = TimePoint::max();
  for (auto& [key, reservation] : reservations_) {
    const auto& record = reservation.record;
    if (record.generation <= record.acked_generation) continue;
    if (now - reservation.last_status_sent >= resend_after(reservation.status_resends))
      send_status(reservation);
    next_status_retry_ = std::min(next_status_retry_, reservation.last_status_sent +
                                                          resend_after(reservation.status_resends));
  }
}

void Agent::restore_reservations(std::vector<store::ReservationRecord> records) {
  for (auto& record : records) {
    ReservationKey key{record.source, record.uid};
    std::string ckey = cluster_key(record.source, record.uid);
    if (store::holds_resources(record.phase)) {
      Status restored = cluster_.restore(ckey, record.spec, record.nodes);
      if (restored.is_ok() && record.phase != store::ReservationPhase::kReserved) {
        TimePoint started = record.started_at_ms ? from_millis(record.started_at_ms)
                                                 : clock_.now();
        restored = cluster_.start(ckey, started, record.spec.duration, record.spec.exit_code);
        // The sim restarts the clock of a running workload where it left off;
        // report Running again only if it had not been reported.
      }
      if (!restored.is_ok()) {
        record.phase = store::ReservationPhase::kFailed;
        record.message = "lost on restart: " + restored.message();
        record.condition = static_cast<uint8_t>(protocol::CopyCondition::kLostOnRestart);
        record.finished_at_ms = to_millis(clock_.now());
        record.exit_code = -1;
        record.generation += 1;
        persist(record);
      }
    }
    reservations_[key] = {std::move(record), TimePoint{}};
  }
}

std::vector<protocol::NamespaceCapacity> Agent::capacity_for(const std::string& peer_id) const {
  std::set<std::string> namespaces;
  const crypto::InvitationLimits* limits = nullptr;
  for (const auto* invitation : valid_issued(peer_id)) {
    namespaces.insert(invitation->namespaces.begin(), invitation->namespaces.end());
    limits = &invitation->limits;
  }
  // What this source may still take under its invitation: limit - used.
  model::Resources allowance{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max(),
                             std::numeric_limits<int64_t>::max()};
  if (limits) {
    InvitationUsage usage = usage_of_source(peer_id);
    auto left = [](std::optional<int64_t> limit, int64_t used, int64_t& out) {
      if (limit) out = std::max<int64_t>(0, *limit - used);
    };
    left(limits->cpu_milli, usage.resources.cpu_milli, allowance.cpu_milli);
    left(limits->memory_bytes, usage.resources.memory_bytes, allowance.memory_bytes);
    left(limits->gpu, usage.resources.gpu, allowance.gpu);
    if (limits->workloads && usage.workloads >= *limits->workloads) allowance = {};
  }
  auto cap = [&](model::Resources r) {
    return model::Resources{std::min(r.cpu_milli, allowance.cpu_milli),
                            std::min(r.memory_bytes, allowance.memory_bytes),
                            std::min(r.gpu, allowance.gpu)};
  };
  // Only aggregates, only for the namespaces this source is invited into,
  // each capped by that namespace's quota headroom and the invitation's limits.
  std::vector<protocol::NamespaceCapacity> out;
  for (const auto& ns : namespaces) {
    cluster::CapacitySummary summary = cluster_.capacity_for(ns);
    protocol::NamespaceCapacity entry{ns, cap(summary.free), cap(summary.largest_free_node), {}};
    for (const auto& queue : cluster_.queue_names()) {
      if (auto per_queue = cluster_.capacity_for(ns, queue)) {
        entry.queues.push_back({queue, cap(per_queue->free), cap(per_queue->largest_free_node)});
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

void Agent::advertise_capacity(bool force) {
  TimePoint now = clock_.now();
  for (auto& [id, peer] : peers_) {
    if (!may_send_as_source(id)) continue;
    std::vector<protocol::NamespaceCapacity> capacity = capacity_for(id);
    bool changed = capacity != peer.last_capacity;
    if (!force && !changed && peer.last_capacity_sent) continue;
    peer.last_capacity_sent = now;
    peer.last_capacity = capacity;
    send(id, protocol::Capacity{std::move(capacity)});
  }
}

}  // namespace shoal::core
