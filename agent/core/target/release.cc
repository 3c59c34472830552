// The target role, letting go: a reservation withdrawn (CANCEL, DELETE,
// expiry), a hosted copy stopped with its grace, and what a source holds
// here once it is gone.
#include "agent/core/target/role.h"

namespace shoal::core::target {

bool TargetRole::withdraw(const ReservationKey& key, uint64_t epoch, bool stop_bound) {
  auto queued = queued_.find(key);
  if (queued != queued_.end() && queued->second.epoch <= epoch) unqueue(queued);
  if (stop_bound && clock_.now() >= lease_plan_.next_end()) {
    // What still ran when its source's lease lapsed stopped then, the
    // moment the source relies on: fenced as of the lapse first (as a
    // renewal does, renew_lease), not stopped as of now. A target waking
    // from a pause may read its source's DELETE before its first tick, and
    // the source may have placed the work elsewhere since the lapse.
    apply_cluster_events();
    enforce_leases();
  }
  auto it = table_.entries().find(key);
  if (it == table_.entries().end() || it->second.record.epoch > epoch) return true;
  bool bound = it->second.record.phase == store::ReservationPhase::kBound ||
               it->second.record.phase == store::ReservationPhase::kRunning;
  if (bound && !stop_bound) return false;
  release_reservation(key, bound ? "stopped: deleted by its source"
                                 : stop_bound ? "deleted by its source" : "cancelled by source");
  return true;
}

void TargetRole::on_cancel(const std::string& from, const protocol::Cancel& message) {
  // CANCEL withdraws candidates and reservations only; bound work is stopped
  // by DELETE, never by a (possibly stale) CANCEL, and gets no RELEASED.
  if (withdraw({from, message.uid}, message.epoch, /*stop_bound=*/false)) {
    context_.send(from, protocol::Released{message.uid, message.epoch});
  }
}

void TargetRole::on_delete(const std::string& from, const protocol::Delete& message) {
  withdraw({from, message.uid}, message.epoch, /*stop_bound=*/true);
  context_.send(from, protocol::Released{message.uid, message.epoch});
}

void TargetRole::forget_reservation(const ReservationKey& key) {
  context_.note_store(context_.store().delete_reservation(key.first, key.second));
  cluster_.forget(cluster_key(key.first, key.second));
  table_.erase(key);
}

Status TargetRole::stop_hosted(const std::string& namespace_name, const std::string& name,
                               const std::string& from_cluster) {
  std::string key = namespace_name + "/" + name;
  std::vector<TargetReservation*> matches;
  std::string sources;
  for (auto& [rkey, reservation] : table_.entries()) {
    const store::ReservationRecord& record = reservation.record;
    if (rkey.first == self_id_ || record.spec.key() != key) continue;
    if (!from_cluster.empty() && context_.cluster_name_of(rkey.first) != from_cluster) continue;
    if (!store::holds_resources(record.phase)) continue;
    matches.push_back(&reservation);
    sources += (sources.empty() ? "" : ", ") + context_.cluster_name_of(rkey.first);
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
    context_.send(rkey.first, protocol::Reject{rkey.second, epoch, "DeletedAtTarget",
                                               protocol::RejectCode::kDeletedAtTarget});
  } else {
    context_.record_event(rkey.second, "deleted at " + config_.cluster + " by its operator");
    fail_copy(reservation, protocol::CopyCondition::kDeletedAtTarget,
              "DeletedAtTarget: by the operator of " + config_.cluster, clock_.now());
  }
  return context_.store_health();
}

void TargetRole::release_reservation(const ReservationKey& key, const std::string& why) {
  auto it = table_.entries().find(key);
  if (it == table_.entries().end()) return;
  cluster_.release(cluster_key(key.first, key.second));
  store::ReservationRecord& record = it->second.record;
  if (store::holds_resources(record.phase)) {
    context_.record_event(key.second, "released at " + config_.cluster + ": " + why);
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

InvitationUsage TargetRole::usage_of_source(const std::string& source) const {
  return table_.usage_of(source);
}

}  // namespace shoal::core::target
