// The target role, admission and binding: answer CANDIDATE with a
// reservation (READY) or a reason (REJECT), queue what fits but not now and
// serve the queue, bind on APPROVE. Priorities and preemption are in
// preemption.cc, letting go (CANCEL, DELETE, expiry) in release.cc, the
// life of a bound copy (status, leases, capacity, timers) in copies.cc.
#include <algorithm>
#include <limits>
#include <set>

#include "agent/core/target/role.h"
#include "common/check.h"

namespace shoal::core::target {

TargetRole::TargetRole(Context& context, PeerTable& peers, const InvitationBook& invitations)
    : advertiser_(context, peers, invitations, counts_,
                  [this](const std::string& source) -> const InvitationUsage& { return table_.held_by(source); }),
      context_(context),
      peers_(peers),
      invitations_(invitations),
      config_(context.config()),
      self_id_(context.self_id()),
      clock_(context.clock()),
      cluster_(context.cluster()) {}

TargetRole::Refusal TargetRole::reject_reason_for(const std::string& from,
                                                  const model::WorkloadSpec& spec) const {
  if (from == self_id_) return {};
  // The most telling reason among the invitations that name this namespace.
  Refusal best{protocol::RejectCode::kNotInvited, "NotInvited"};
  TimePoint now = clock_.now();
  for (const InvitationBook::Owned* owned : invitations_.issued_to(from)) {
    if (!owned->invitation.covers(spec.namespace_name)) continue;
    InvitationState state = InvitationBook::state(*owned, now);
    if (state == InvitationState::kActive) return limit_refusal(from, spec);
    if (state == InvitationState::kReplaced) continue;  // its successor decides
    if (best.code == protocol::RejectCode::kNotInvited || state == InvitationState::kRevoked) {
      best = {protocol::RejectCode::kInvitationNotValid, invitation_state_name(state)};
    }
  }
  return best;
}

TargetRole::Refusal TargetRole::limit_refusal(const std::string& from,
                                              const model::WorkloadSpec& spec) const {
  if (from == self_id_) return {};
  const crypto::InvitationLimits* limits = guest_limits(from);
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

void TargetRole::reject_candidate(const std::string& from, const protocol::Candidate& message,
                                  const Refusal& refusal) {
  // Counted per reason text for `shoalctl status`: the text names the
  // resource or queue, which is what an operator needs to see.
  ++context_.stats().rejected[refusal.reason];
  if (from != self_id_) {
    advertiser_.note_refused(from);  // it hears of the next room freed
    context_.record_event("peer/" + from,
                          "rejected candidate " + message.spec.key() + ": " + refusal.reason);
  }
  context_.send(from, protocol::Reject{message.uid, message.epoch, refusal.reason, refusal.code});
  // A source that offers work under an invitation we revoked has not heard
  // the REVOKE (lost, or sent while it was away). Its HELLOs are answered
  // with it (Router::on_hello), but a source busy offering work sends no
  // HELLO (Router::send_heartbeats): the refusal carries it too.
  for (const std::string& id : invitations_.revocations_to_tell(from, clock_.now())) {
    context_.send(from, protocol::Revoke{id, false});
  }
}

void TargetRole::withdraw_from_source(const std::string& source, const std::string& why,
                                      bool evict) {
  for (auto it = queued_.lower_bound({source, ""}); it != queued_.end() && it->first.first == source;) {
    unqueue(it++);
  }
  std::vector<ReservationKey> unapproved;
  for (auto& [key, reservation] : table_.entries()) {
    if (key.first != source) continue;
    store::ReservationRecord& record = reservation.record;
    if (record.phase == store::ReservationPhase::kReserved) {
      unapproved.push_back(key);
    } else if (evict && store::holds_resources(record.phase)) {
      context_.record_event(record.uid, "evicted at " + config_.cluster + ": " + why);
      fail_copy(reservation, protocol::CopyCondition::kRevoked, "Revoked", clock_.now());
    }
  }
  for (const auto& key : unapproved) release_reservation(key, why);
}

void TargetRole::on_candidate(const std::string& from, const protocol::Candidate& message) {
  ReservationKey key{from, message.uid};
  auto it = table_.entries().find(key);
  if (it != table_.entries().end()) {
    store::ReservationRecord& existing = it->second.record;
    if (message.epoch < existing.epoch) {
      context_.send(from, protocol::Reject{message.uid, message.epoch, "StaleEpoch",
                                           protocol::RejectCode::kStaleEpoch});
      return;
    }
    if (message.epoch == existing.epoch) {
      // A retry: answer the same again, score included (after a restart we
      // no longer know it, and say what we would say now).
      double score =
          it->second.ready_score >= 0 ? it->second.ready_score : free_cpu_score(cluster_);
      context_.send(from, protocol::Ready{message.uid, message.epoch, score});
      return;
    }
    if (existing.phase == store::ReservationPhase::kBound ||
        existing.phase == store::ReservationPhase::kRunning) {
      // The source re-places a workload we still run; never run it twice.
      context_.send(from, protocol::Reject{message.uid, message.epoch, "AlreadyBound",
                                           protocol::RejectCode::kAlreadyBound});
      return;
    }
    if (existing.phase == store::ReservationPhase::kReserved) {
      // A new round of a workload we hold room for: our READY crossed the
      // source's next round. The room moves to the new epoch (a CANCEL or
      // APPROVE of the old one no longer touches it), so the workload keeps
      // the place in line it waited for instead of queuing again at the back.
      existing.epoch = message.epoch;
      existing.expires_at = clock_.now() + config_.reservation_ttl;
      next_reservation_expiry_ = std::min(next_reservation_expiry_, existing.expires_at);
      persist(existing);
      it->second.ready_score = free_cpu_score(cluster_);
      context_.send(from, protocol::Ready{message.uid, message.epoch, it->second.ready_score});
      return;
    }
    // An older epoch that has finished: superseded.
    release_reservation(key, "superseded by epoch " + std::to_string(message.epoch));
  }

  if (Refusal refusal = reject_reason_for(from, message.spec); refusal) {
    if (auto queued = queued_.find(key); queued != queued_.end()) unqueue(queued);
    reject_candidate(from, message, refusal);
    return;
  }
  if (int32_t granted = granted_priority(guest_limits(from), message.spec.priority);
      granted != message.spec.priority) {
    // Held to what the invitation grants, here only: the source keeps its own.
    protocol::Candidate held = message;
    held.spec.priority = granted;
    context_.record_event("peer/" + from, "candidate " + message.spec.key() + " claims priority " +
                                              std::to_string(message.spec.priority) +
                                              "; held to its invitation's " +
                                              std::to_string(granted));
    on_admissible_candidate(from, held);
    return;
  }
  on_admissible_candidate(from, message);
}

void TargetRole::on_admissible_candidate(const std::string& from, const protocol::Candidate& message) {
  ReservationKey key{from, message.uid};
  // A cluster manager that does not answer cannot start anything: say so
  // now, so the source tries elsewhere or again later. What already waits
  // in our queue keeps its place.
  if (Status health = cluster_.health(); !health.is_ok() && !queued_.count(key)) {
    reject_candidate(from, message,
                     {protocol::RejectCode::kBackendUnavailable, "BackendUnavailable: " + health.message()});
    return;
  }
  TimePoint now = clock_.now();
  auto queued = queued_.find(key);
  // Approved in advance, and an epoch this target has not answered yet:
  // room held before this step ends binds it (reserve_for).
  bool approved_now = message.approved && (queued == queued_.end() || queued->second.epoch < message.epoch);
  if (queued != queued_.end()) {
    if (message.epoch < queued->second.epoch) {
      context_.send(from, protocol::Reject{message.uid, message.epoch, "StaleEpoch",
                                           protocol::RejectCode::kStaleEpoch});
      return;
    }
    // A retry or a new round of a waiting candidate: it keeps its place in
    // line, unless its priority changed since (a lost PRIORITY).
    // An offer to preempt was for its epoch: a new round is served afresh.
    if (queued->second.epoch != message.epoch) queued->second.offered_preemption = false;
    queued->second.epoch = message.epoch;
    take_priority(key, message.epoch, message.spec.priority);
    queued = queued_.find(key);
    queued->second.spec = message.spec;
    queued->second.hold_until = now + config_.queue_hold;
  } else {
    // What can never fit here is refused for good rather than queued.
    Status fits = cluster_.fits_when_idle(message.spec);
    if (!fits.is_ok()) {
      reject_candidate(from, message, {protocol::RejectCode::kNeverFits, fits.message()});
      return;
    }
    queue_candidate(key, {message.epoch, message.spec, now + config_.queue_hold});
    next_queue_expiry_ = std::min(next_queue_expiry_, now + config_.queue_hold);
  }
  // The newcomer is served at the end of this step (serve_asked), together
  // with whatever already waits and every other candidate of the step: it
  // cannot overtake work the scheduler ranks ahead of it, and a step that
  // brings thousands of candidates (one big submit to our own cluster)
  // costs one pass over the queue, not one per candidate.
  asked_.insert(key);
  if (approved_now) approved_now_[key] = {message.epoch, to_millis(context_.sent_at())};
}

bool TargetRole::serve_asked() {
  if (asked_.empty()) return false;
  std::set<ReservationKey> asked = std::move(asked_);
  asked_.clear();
  serve_queue();
  // What was approved in advance and found no room now waits like any
  // candidate: its READY, when room frees, needs an APPROVE.
  approved_now_.clear();
  for (const ReservationKey& key : asked) {
    auto entry = queued_.find(key);
    if (entry == queued_.end()) continue;  // reserved or refused
    if (offer_preemption(key, entry->second)) continue;
    std::string why = cluster_.queued_reason(cluster_key(key.first, key.second));
    // "NoCapacity:" tells the source the candidate waits here: a READY for
    // this epoch may follow when room frees (protocol/README.md).
    reject_candidate(key.first, {key.second, entry->second.epoch, entry->second.spec},
                     {protocol::RejectCode::kNoCapacity, "NoCapacity:" + why});
  }
  return true;
}

void TargetRole::queue_candidate(const ReservationKey& key, QueuedCandidate candidate) {
  std::string cluster_name = cluster_key(key.first, key.second);
  cluster_.enqueue(cluster_name, candidate.spec);
  queued_by_cluster_key_[cluster_name] = key;
  auto [it, inserted] = queued_.insert_or_assign(key, std::move(candidate));
  if (inserted) {
    counts_.queued(it->second.spec.namespace_name, it->second.spec.queue, 1);
    counts_changed_ = true;
  }
}

void TargetRole::unqueue(std::map<ReservationKey, QueuedCandidate>::iterator it) {
  std::string cluster_name = cluster_key(it->first.first, it->first.second);
  cluster_.withdraw(cluster_name);
  queued_by_cluster_key_.erase(cluster_name);
  counts_.queued(it->second.spec.namespace_name, it->second.spec.queue, -1);
  counts_changed_ = true;
  queued_.erase(it);
}

void TargetRole::reserve_for(const ReservationKey& key, uint64_t epoch,
                             const model::WorkloadSpec& spec, std::vector<std::string> nodes) {
  double score = file_reservation(key, epoch, spec, std::move(nodes));
  auto approved = approved_now_.find(key);
  if (approved != approved_now_.end() && approved->second.epoch == epoch) {
    int64_t sent_at_ms = approved->second.sent_at_ms;
    approved_now_.erase(approved);
    bind(key, table_.entries().find(key)->second, sent_at_ms);
    return;
  }
  context_.send(key.first, protocol::Ready{key.second, epoch, score});
}

double TargetRole::file_reservation(const ReservationKey& key, uint64_t epoch,
                                    const model::WorkloadSpec& spec, std::vector<std::string> nodes) {
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
  persist_with_spec(record);
  counts_changed_ = true;  // room taken: sources hear of it at the next tick
  reservation.ready_score = free_cpu_score(cluster_);
  double score = reservation.ready_score;
  table_.file(key, std::move(reservation));
  return score;
}

void TargetRole::on_approve(const std::string& from, const protocol::Approve& message) {
  ReservationKey key{from, message.uid};
  auto it = table_.entries().find(key);
  if (auto queued = queued_.find(key); it == table_.entries().end() && queued != queued_.end() &&
                                        queued->second.offered_preemption &&
                                        queued->second.epoch == message.epoch) {
    if (!approve_by_preemption(key, message)) return;  // refused, and told so
    it = table_.entries().find(key);
  }
  // A copy that finished since the source decided to adopt it is adopted
  // all the same: its outcome is the workload's (only a reservation that
  // never bound cannot be).
  bool adoptable = it != table_.entries().end() && from != self_id_ &&
                   it->second.record.phase != store::ReservationPhase::kReserved;
  if (it == table_.entries().end() || (it->second.record.epoch < message.epoch && !adoptable)) {
    context_.send(from, protocol::Reject{message.uid, message.epoch, "ReservationExpired",
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
    context_.record_event(record.uid, "adopted by " + context_.cluster_name_of(from) +
                                          " under epoch " + std::to_string(message.epoch) +
                                          " (was " + std::to_string(record.epoch) + ")");
    record.epoch = message.epoch;
    record.generation += 1;
    persist(record);
    context_.send(from, protocol::Bound{record.uid, record.epoch, record.nodes});
    send_status(reservation);
    return;
  }
  if (record.phase != store::ReservationPhase::kReserved) {
    // A retry, or a source that re-adopts this copy under the same epoch:
    // it needs the copy's status again, which generation numbers make safe.
    context_.send(from, protocol::Bound{record.uid, record.epoch, record.nodes});
    send_status(reservation);
    return;
  }
  TimePoint now = clock_.now();
  if (record.expires_at <= now) {
    ++context_.stats().reservations_expired;
    release_reservation(key, "reservation expired before approval");
    context_.send(from, protocol::Reject{message.uid, message.epoch, "ReservationExpired",
                                         protocol::RejectCode::kReservationExpired});
    return;
  }
  SHOAL_CHECK(record.epoch == message.epoch, "a reservation bound under an epoch its APPROVE did not name");
  bind(key, reservation, to_millis(context_.sent_at()));
}

void TargetRole::bind(const ReservationKey& key, TargetReservation& reservation,
                      int64_t renewal_sent_at_ms) {
  const std::string& from = key.first;
  store::ReservationRecord& record = reservation.record;
  TimePoint now = clock_.now();
  renew_lease(from, renewal_sent_at_ms);  // before binding: a lapse stops only what ran before it
  // Launched once this batch, and with it the Bound row, is committed.
  to_launch_.emplace_back(key, record.epoch);
  record.phase = store::ReservationPhase::kBound;
  record.started_at_ms = to_millis(now);
  record.generation += 1;
  persist(record);
  note_start_deadline(record);
  context_.record_event(record.uid, "bound for " + context_.cluster_name_of(from) + " on " +
                                        (record.nodes.empty() ? "" : record.nodes.front()) +
                                        (record.nodes.size() > 1 ? " and others" : ""));
  context_.send(from, protocol::Bound{record.uid, record.epoch, record.nodes});
  send_status(reservation);
}

void TargetRole::serve_queue() {
  if (queued_.empty()) return;
  for (cluster::Cluster::Reserved& reserved : cluster_.serve_queue()) {
    auto named = queued_by_cluster_key_.find(reserved.key);
    SHOAL_CHECK(named != queued_by_cluster_key_.end(),
                "the cluster served a candidate the target never queued (they queue alike)");
    ReservationKey key = named->second;
    auto it = queued_.find(key);
    QueuedCandidate entry = std::move(it->second);
    queued_by_cluster_key_.erase(named);
    counts_.queued(entry.spec.namespace_name, entry.spec.queue, -1);
    counts_changed_ = true;
    queued_.erase(it);
    // The invitation may have expired while it waited, and several
    // candidates of one source admitted together could overrun its limits:
    // each is checked again against what is already reserved.
    if (Refusal refusal = reject_reason_for(key.first, entry.spec); refusal) {
      cluster_.release(reserved.key);
      reject_candidate(key.first, {key.second, entry.epoch, entry.spec}, refusal);
      continue;
    }
    reserve_for(key, entry.epoch, entry.spec, std::move(reserved.nodes));
  }
}

}  // namespace shoal::core::target
