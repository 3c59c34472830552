// The target role, what keeps a source's copies here alive or ends them:
// its DIGEST (the copies it still wants, its lease renewed), leases and
// fencing (a copy whose source's lease lapsed is stopped), start timeouts,
// and reading a copy's output for its source (LOG_REQUEST).
#include <algorithm>

#include "agent/core/target/role.h"
#include "common/check.h"

namespace shoal::core::target {

void TargetRole::on_digest(const std::string& from, const protocol::Digest& message) {
  if (from == self_id_) return;
  const PeerTable::Peer* source = peers_.find(from);
  if (!source) return;
  // A lease is minutes; a day bounds what a confused or hostile peer can ask
  // for (and keeps the arithmetic below far from overflow).
  constexpr uint64_t kLongestLeaseMs = 24ull * 3600 * 1000;
  int64_t lease_ms = static_cast<int64_t>(std::min(message.lease_ms, kLongestLeaseMs));
  if (lease_ms == 0) {
    peers_.set_lease(from, 0, 0);  // the source runs without fencing
  } else {
    peers_.set_lease(from, lease_ms, source->lease_until_ms);
    renew_lease(from);  // and its end planned
  }
  // Garbage collection: a finished copy whose last status the source has
  // acknowledged, and which the source no longer counts as held here, is
  // done with.
  std::set<std::pair<std::string, uint64_t>> listed;
  for (const auto& copy : message.copies) {
    listed.emplace(copy.uid, copy.epoch);
    if (copy.priority) take_priority({from, copy.uid}, copy.epoch, *copy.priority);
  }
  std::vector<ReservationKey> collected;
  protocol::Holdings holdings;
  for (const auto& [key, reservation] : table_.entries()) {
    if (key.first != from) continue;
    const store::ReservationRecord& record = reservation.record;
    if (record.phase == store::ReservationPhase::kReserved) continue;
    bool finished = !store::holds_resources(record.phase);
    if (finished && record.acked_generation >= record.generation &&
        !listed.count({record.uid, record.epoch})) {
      collected.push_back(key);
      continue;
    }
    holdings.copies.push_back({record.uid, record.epoch, ReservationTable::source_phase(record.phase)});
  }
  for (const auto& key : collected) forget_reservation(key);
  context_.send(from, std::move(holdings));
}

void TargetRole::on_log_request(const std::string& from, const protocol::LogRequest& message) {
  protocol::LogChunk answer;
  answer.request_id = message.request_id;
  auto fail = [&](const Status& why) {
    answer.error_code = error_code_name(why.code());
    answer.error = why.message();
    context_.send(from, std::move(answer));
  };
  auto it = table_.entries().find({from, message.uid});
  if (it != table_.entries().end()) {
    const store::ReservationRecord& record = it->second.record;
    if (record.epoch != message.epoch) {
      return fail(not_found("copy " + message.uid + " runs here at epoch " +
                            std::to_string(record.epoch) + ", not " + std::to_string(message.epoch)));
    }
    if (record.phase == store::ReservationPhase::kReserved) {
      return fail(Status(ErrorCode::kUnavailable,
                         record.spec.key() + " is reserved at " + config_.cluster + ", not started yet"));
    }
  }
  // A finished copy the source has let go of may still have its output here
  // (the cluster keeps it a while): the cluster answers for it by key.
  size_t limit = std::min<size_t>(message.max_bytes, protocol::kMaxLogChunkBytes);
  Result<cluster::LogChunk> chunk =
      cluster_.read_log(cluster_key(from, message.uid), message.replica, message.offset, limit);
  if (!chunk.is_ok()) return fail(chunk.status().with_context("at " + config_.cluster));
  answer.data = std::move(chunk->data);
  answer.offset = chunk->offset;
  answer.next_offset = chunk->next_offset;
  answer.finished = chunk->finished;
  answer.pending = chunk->pending;
  context_.send(from, std::move(answer));
}

void TargetRole::renew_lease(const std::string& source_id) {
  renew_lease(source_id, to_millis(context_.sent_at()));
}

void TargetRole::renew_lease(const std::string& source_id, int64_t sent_at) {
  const PeerTable::Peer* source = peers_.find(source_id);
  if (!source || source->lease_ms <= 0) return;
  // A lease that lapsed before this renewal was sent is never revived: the
  // source counts its copies here stopped since the lapse and may have
  // placed them elsewhere (a source that wakes from a pause renews at once).
  // So first what finished before the lapse is taken, and what still ran
  // then is stopped as of the lapse; only then does the lease go on.
  if (source->lease_until_ms > 0 && sent_at >= source->lease_until_ms) {
    apply_cluster_events();
    enforce_leases();
  }
  peers_.set_lease(source_id, source->lease_ms,
                   std::max(source->lease_until_ms, sent_at + source->lease_ms));
  lease_plan_.note(source_id);
}

void TargetRole::enforce_leases() {
  TimePoint now = clock_.now();
  // No lease of a source with work here ends before the plan's next end
  // (LeasePlan::broken_invariant), so until then there is nothing to stop.
  if (now < lease_plan_.next_end()) return;
  // Leases are per source, and sources are few: find the lapsed ones, then
  // visit only their reservations (the table is ordered by source).
  for (const auto& [source_id, peer] : peers_.all()) {
    std::optional<TimePoint> ends = peers_.lease_end_of(source_id, peer);
    if (!ends || *ends > now) continue;
    for (auto it = table_.entries().lower_bound({source_id, ""});
         it != table_.entries().end() && it->first.first == source_id; ++it) {
      fence_copy(it->first, it->second, *ends);
      SHOAL_CHECK(it->second.record.phase != store::ReservationPhase::kBound &&
                      it->second.record.phase != store::ReservationPhase::kRunning,
                  "a copy still runs after its source's lease ended");
    }
  }
}

void TargetRole::fence_copy(const ReservationKey& key, TargetReservation& reservation,
                            TimePoint lease_end) {
  store::ReservationRecord& record = reservation.record;
  if (record.phase != store::ReservationPhase::kBound &&
      record.phase != store::ReservationPhase::kRunning) {
    return;
  }
  // The copy stops as of the lease's end: that is the moment the source
  // relies on (a target frozen past it stops the copy on waking, dated then).
  context_.record_event(record.uid, "stopped at " + config_.cluster + ": the lease of " +
                                        context_.cluster_name_of(key.first) + " ended at " +
                                        format_time(lease_end));
  fail_copy(reservation, protocol::CopyCondition::kLeaseExpired,
            "LeaseExpired: no renewal from " + context_.cluster_name_of(key.first), lease_end);
}

void TargetRole::give_up_unstarted() {
  TimePoint now = clock_.now();
  // No bound copy's deadline is before next_start_deadline_ (broken_invariant).
  if (now < next_start_deadline_) return;
  next_start_deadline_ = TimePoint::max();
  for (auto& [key, reservation] : table_.entries()) {
    const store::ReservationRecord& record = reservation.record;
    TimePoint deadline = start_deadline(record);
    if (deadline > now) {
      next_start_deadline_ = std::min(next_start_deadline_, deadline);
      continue;
    }
    // Its cluster keeps it pending (a drained partition, a QOS limit, a
    // busy queue): the source can place it where there is room. The copy
    // never started, so releasing it here stops nothing that ran, and the
    // source waits its backoff before the next round.
    std::string why = "not started within its startTimeout of " +
                      format_duration(record.spec.start_timeout) + " at " + config_.cluster;
    std::string waits_for = cluster_.unstarted_reason(cluster_key(key.first, key.second));
    if (!waits_for.empty()) why += " (" + waits_for + ")";
    context_.record_event(record.uid, "given up: " + why);
    fail_copy(reservation, protocol::CopyCondition::kStartTimeout, "StartTimeout: " + why, now);
  }
}

}  // namespace shoal::core::target
