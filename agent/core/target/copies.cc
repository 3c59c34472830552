// The target role, the life of a bound copy: launch after commit, cluster
// events into STATUS reports (repeated until acknowledged), garbage
// collection, expiry, restore, and the role's timers. Leases, fencing,
// digests and start timeouts are in leases.cc; what sources are
// told of our room is advertiser.cc's.
#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include "agent/core/target/role.h"
#include "common/check.h"

namespace shoal::core::target {
namespace {

// The wire's name for an end the cluster caused (EndCause::kOwn has none).
protocol::CopyCondition condition_of(cluster::EndCause cause) {
  switch (cause) {
    case cluster::EndCause::kNodeFailed:
      return protocol::CopyCondition::kNodeFailed;
    case cluster::EndCause::kEvicted:
      return protocol::CopyCondition::kEvicted;
    case cluster::EndCause::kPreempted:
      return protocol::CopyCondition::kPreempted;
    case cluster::EndCause::kOwn:
      break;
  }
  return protocol::CopyCondition::kNone;
}

}  // namespace

void TargetRole::fail_copy(TargetReservation& reservation, protocol::CopyCondition condition,
                           const std::string& why, TimePoint at) {
  store::ReservationRecord& record = reservation.record;
  std::string ckey = cluster_key(record.source, record.uid);
  if (condition == protocol::CopyCondition::kLeaseExpired) {
    // The source may place this work again once workerLostTimeout has
    // passed since it last heard from us, which the fencing contract keeps
    // longer than lease + skew: the grace fits in what is left, so the copy
    // is gone before another can start.
    Duration slack = config_.worker_lost_timeout - config_.lease - 2 * config_.max_clock_skew;
    cluster_.stop(ckey, std::clamp(record.spec.termination_grace, Duration(0),
                                   std::max(slack, Duration(0))));
  } else {
    cluster_.release(ckey);
  }
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

void TargetRole::collect_local_garbage() {
  // Copies of other sources are collected through their digests; our own
  // cluster's copies are acknowledged in the batch they finish in. A
  // forgotten source acknowledges nothing any more: its finished copies go
  // once their stop's grace is over (the cluster has let them go by then).
  std::vector<ReservationKey> collected;
  TimePoint now = clock_.now();
  for (const auto& [key, reservation] : table_.entries()) {
    const store::ReservationRecord& record = reservation.record;
    if (store::holds_resources(record.phase)) continue;
    bool acked = record.acked_generation >= record.generation;
    if ((key.first == self_id_ && acked) ||
        (peers_.forgotten_at(key.first) &&
         now >= from_millis(record.finished_at_ms) + record.spec.termination_grace)) {
      collected.push_back(key);
    }
  }
  for (const auto& key : collected) forget_reservation(key);
}

void TargetRole::on_status_ack(const std::string& from, const protocol::StatusAck& message) {
  auto it = table_.entries().find({from, message.uid});
  if (it == table_.entries().end()) return;
  store::ReservationRecord& record = it->second.record;
  if (record.epoch != message.epoch || message.generation <= record.acked_generation) return;
  record.acked_generation = std::min(message.generation, record.generation);
  persist(record);
}

void TargetRole::send_status(TargetReservation& reservation, bool lazily) {
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
  status.phase = ReservationTable::source_phase(record.phase);
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
  if (lazily) {
    context_.send_later(record.source, std::move(status), context_.lazy_delay());
  } else {
    context_.send(record.source, std::move(status));
  }
}

void TargetRole::apply_cluster_events() {
  // Changes that land in one tick are coalesced: one STATUS per copy, with
  // its newest state and generation.
  std::set<ReservationKey> changed;
  for (const auto& event : cluster_.observe(clock_.now())) {
    if (event.kind == cluster::WorkloadEventKind::kStopped) {
      capacity_changed_ = true;  // work stopped earlier is gone: its room is free
      continue;
    }
    size_t slash = event.key.find('/');
    if (slash == std::string::npos) continue;
    ReservationKey key{event.key.substr(0, slash), event.key.substr(slash + 1)};
    auto it = table_.entries().find(key);
    if (it == table_.entries().end()) continue;
    store::ReservationRecord& record = it->second.record;
    // A copy whose source's lease ended before this event had stopped by
    // then: a target frozen (or down) past the lease learns of its jobs'
    // later starts and finishes only on waking, and must not report them.
    // enforce_leases, next in the tick, stops the copy as of the lease's end.
    if (std::optional<TimePoint> lease_end = peers_.lease_end_of(key.first);
        lease_end && *lease_end <= event.at) {
      continue;
    }
    std::string told;  // what this target's history says of the change
    switch (event.kind) {
      case cluster::WorkloadEventKind::kWaiting:
        // Why a bound copy has not started: its source shows it in describe.
        if (record.phase != store::ReservationPhase::kBound || record.message == event.message) continue;
        record.message = event.message;
        told = event.message.empty() ? "no longer waits" : "waits: " + event.message;
        break;
      case cluster::WorkloadEventKind::kStarted:
        if (record.phase != store::ReservationPhase::kBound) continue;
        record.phase = store::ReservationPhase::kRunning;
        record.message = event.message;  // how the backend runs it, e.g. its limits
        break;
      case cluster::WorkloadEventKind::kStopped:
        continue;  // handled above
      case cluster::WorkloadEventKind::kLost:
        if (!store::holds_resources(record.phase)) continue;
        record.phase = store::ReservationPhase::kFailed;
        record.finished_at_ms = to_millis(event.at);
        record.exit_code = -1;
        record.message = "LostOnRestart: " + event.message;
        record.condition = static_cast<uint8_t>(protocol::CopyCondition::kLostOnRestart);
        capacity_changed_ = true;
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
        if (event.kind == cluster::WorkloadEventKind::kFailed && event.cause != cluster::EndCause::kOwn) {
          protocol::CopyCondition condition = condition_of(event.cause);
          record.condition = static_cast<uint8_t>(condition);
          record.message = std::string(protocol::kCopyConditionNames[record.condition]) + ": " + event.message;
        }
        capacity_changed_ = true;
        break;
    }
    record.generation += 1;
    persist(record);
    if (told.empty()) told = store::kReservationPhaseNames[static_cast<int>(record.phase)];
    context_.record_event(record.uid, "at " + config_.cluster + ": " + told);
    changed.insert(key);
  }
  for (const auto& key : changed) send_status(table_.entries().at(key), /*lazily=*/true);
}

void TargetRole::expire_reservations() {
  TimePoint now = clock_.now();
  if (now >= next_reservation_expiry_) {
    std::vector<ReservationKey> expired;
    next_reservation_expiry_ = TimePoint::max();
    for (const auto& [key, reservation] : table_.entries()) {
      if (reservation.record.phase != store::ReservationPhase::kReserved) continue;
      if (reservation.record.expires_at <= now) {
        expired.push_back(key);
      } else {
        next_reservation_expiry_ =
            std::min(next_reservation_expiry_, reservation.record.expires_at);
      }
    }
    context_.stats().reservations_expired += expired.size();
    for (const auto& key : expired) release_reservation(key, "reservation expired unapproved");
  }
  // A queued candidate whose source stopped asking has been placed elsewhere
  // or given up; forget it.
  if (now >= next_queue_expiry_) {
    next_queue_expiry_ = TimePoint::max();
    for (auto it = queued_.begin(); it != queued_.end();) {
      if (it->second.hold_until <= now) {
        unqueue(it++);
        continue;
      }
      next_queue_expiry_ = std::min(next_queue_expiry_, it->second.hold_until);
      ++it;
    }
  }
}

void TargetRole::retry_status_reports() {
  TimePoint now = clock_.now();
  if (now < next_status_retry_) return;
  next_status_retry_ = TimePoint::max();
  for (auto& [key, reservation] : table_.entries()) {
    const auto& record = reservation.record;
    if (record.generation <= record.acked_generation) continue;
    if (now >= context_.resend_at(record.source, reservation.last_status_sent,
                                  reservation.status_resends)) {
      send_status(reservation);
    }
    next_status_retry_ =
        std::min(next_status_retry_, context_.resend_at(record.source, reservation.last_status_sent,
                                                        reservation.status_resends));
  }
}

void TargetRole::restore(std::vector<store::ReservationRecord> records) {
  TimePoint now = clock_.now();
  last_gc_ = now;
  // Victims still stopping when the agent went down first: each holds its
  // room again until it is gone, so that what took it (its preemptor,
  // restored next, or anything else) never starts beside it.
  auto stopping_victim = [](const store::ReservationRecord& record) {
    return store::holds_resources(record.phase) && record.phase != store::ReservationPhase::kReserved &&
           record.condition == static_cast<uint8_t>(protocol::CopyCondition::kPreempted);
  };
  std::stable_partition(records.begin(), records.end(), stopping_victim);
  for (auto& record : records) {
    ReservationKey key{record.source, record.uid};
    std::string ckey = cluster_key(record.source, record.uid);
    if (stopping_victim(record)) {
      Status restored = cluster_.restore_preempted(ckey, record.spec, record.nodes, now);
      note_start_deadline(record);
      if (!restored.is_ok()) lose_on_restart(record, restored);
      table_.file(key, {std::move(record), TimePoint{}});
      continue;
    }
    if (store::holds_resources(record.phase)) {
      Status restored = cluster_.restore(ckey, record.spec, record.nodes,
                                         record.phase == store::ReservationPhase::kReserved
                                             ? cluster::Cluster::Restored::kReserved
                                             : cluster::Cluster::Restored::kLaunched);
      note_start_deadline(record);
      if (restored.is_ok() && record.phase != store::ReservationPhase::kReserved) {
        // Launched again (re-attached) after this batch commits; the sim
        // restarts the clock of a running workload where it left off.
        to_launch_.emplace_back(key, record.epoch);
      }
      if (record.phase == store::ReservationPhase::kReserved) {
        next_reservation_expiry_ = std::min(next_reservation_expiry_, record.expires_at);
      }
      if (!restored.is_ok()) lose_on_restart(record, restored);
    }
    table_.file(key, {std::move(record), TimePoint{}});
  }
}

void TargetRole::lose_on_restart(store::ReservationRecord& record, const Status& why) {
  record.phase = store::ReservationPhase::kFailed;
  record.message = "lost on restart: " + why.message();
  record.condition = static_cast<uint8_t>(protocol::CopyCondition::kLostOnRestart);
  record.finished_at_ms = to_millis(clock_.now());
  record.exit_code = -1;
  record.generation += 1;
  persist(record);
}

bool TargetRole::tick(TimePoint now, std::optional<TimePoint> previous_pass) {
  fail_launches();
  apply_cluster_events();
  enforce_leases();
  lease_plan_.plan(now);
  give_up_unstarted();
  expire_reservations();
  // Freed room goes to queued candidates first, before it is advertised.
  if (capacity_changed_) serve_queue();
  retry_status_reports();
  // Something was released or finished: say so to a source refused in
  // between even if the totals look the same as last time.
  TimePoint due_before{};
  if (previous_pass) {
    // Due: a source that had no CAPACITY since three passes back, so one
    // every other interval; the HELLO of the pass in between (sent when the
    // link is otherwise silent) keeps it hearing from us every interval.
    due_before = advertiser_.note_pass(*previous_pass);
  }
  const bool counts_moved = table_.take_counts_moved();
  if (capacity_changed_) {
    advertiser_.advertise(Advertiser::To::kRoomFreed, due_before);
  } else if (counts_changed_ || counts_moved || previous_pass) {
    advertiser_.advertise(Advertiser::To::kChanged, due_before);
  }
  counts_changed_ = false;
  if (now - last_gc_ >= config_.gc_interval) {
    last_gc_ = now;
    collect_local_garbage();
  }
  bool room_freed = capacity_changed_;
  capacity_changed_ = false;
  return room_freed;
}

void TargetRole::launch_bound() {
  std::vector<std::pair<ReservationKey, uint64_t>> due = std::move(to_launch_);
  to_launch_.clear();
  for (const auto& [key, epoch] : due) {
    auto it = table_.entries().find(key);
    // Released, fenced or superseded since it bound: nothing to launch.
    if (it == table_.entries().end() || it->second.record.epoch != epoch) continue;
    const store::ReservationRecord& record = it->second.record;
    if (record.phase != store::ReservationPhase::kBound &&
        record.phase != store::ReservationPhase::kRunning) {
      continue;
    }
    cluster::LaunchRequest request;
    request.key = cluster_key(key.first, key.second);
    request.uid = record.uid;
    request.epoch = record.epoch;
    request.source_cluster = context_.cluster_name_of(record.source);
    request.spec = record.spec;
    request.nodes = record.nodes;
    request.started_at = record.started_at_ms ? from_millis(record.started_at_ms) : clock_.now();
    Status launched = cluster_.launch(request);
    if (!launched.is_ok()) failed_launches_.push_back({key, epoch, launched.message()});
  }
}

void TargetRole::fail_launches() {
  std::vector<FailedLaunch> failed = std::move(failed_launches_);
  failed_launches_.clear();
  for (const FailedLaunch& launch : failed) {
    auto it = table_.entries().find(launch.key);
    if (it == table_.entries().end() || it->second.record.epoch != launch.epoch ||
        !store::holds_resources(it->second.record.phase)) {
      continue;
    }
    context_.record_event(launch.key.second,
                          "could not start at " + config_.cluster + ": " + launch.why);
    fail_copy(it->second, protocol::CopyCondition::kStartFailed, "StartFailed: " + launch.why,
              clock_.now());
  }
}

TimePoint TargetRole::next_deadline() const {
  if (!failed_launches_.empty() || capacity_changed_ || !asked_.empty()) return TimePoint::min();
  return std::min({next_reservation_expiry_, next_status_retry_, next_queue_expiry_,
                   last_gc_ + config_.gc_interval, cluster_.next_event_at(), lease_plan_.next_end(),
                   next_start_deadline_});
}

std::vector<store::ReservationRecord> TargetRole::reservations() const {
  std::vector<store::ReservationRecord> out;
  out.reserve(table_.entries().size());
  for (const auto& [key, reservation] : table_.entries()) out.push_back(reservation.record);
  return out;
}

std::string TargetRole::broken_invariant() const {
  if (std::string broken = counts_.broken_invariant(); !broken.empty()) return broken;
  if (std::string broken = table_.broken_invariant(); !broken.empty()) return broken;
  if (std::string broken = advertiser_.broken_invariant(); !broken.empty()) return broken;
  // An approval in advance binds only within the step that read it.
  if (!approved_now_.empty() && asked_.empty()) return "an approval in advance outlived its step";
  // The cluster's queue holds what queued_ holds, under the cluster's key.
  if (queued_by_cluster_key_.size() != queued_.size()) {
    return "the cluster's queue and queued_ differ in size";
  }
  for (const auto& [cluster_name, key] : queued_by_cluster_key_) {
    if (!queued_.contains(key) || cluster_name != cluster_key(key.first, key.second)) {
      return "a queued key is not under its cluster key";
    }
  }
  for (const auto& [key, reservation] : table_.entries()) {
    const auto& record = reservation.record;
    // Whatever holds resources holds one node per replica.
    if (store::holds_resources(record.phase) &&
        record.nodes.size() != static_cast<size_t>(record.spec.replicas)) {
      return "a reservation holding resources lacks a node per replica";
    }
    // The scans' lower bounds are lower bounds: no deadline hides before them.
    if (record.phase == store::ReservationPhase::kReserved &&
        record.expires_at < next_reservation_expiry_) {
      return "a reservation expires before next_reservation_expiry_";
    }
    if (start_deadline(record) < next_start_deadline_) {
      return "a bound copy's start deadline is before next_start_deadline_";
    }
    // (The latest a retry can be due: flow control only postpones it, and
    // an acknowledgement that ends the postponement may come later.)
    if (record.generation > record.acked_generation &&
        context_.latest_resend_at(record.source, reservation.last_status_sent,
                                  reservation.status_resends) < next_status_retry_) {
      return "a status retry is due before next_status_retry_";
    }
  }
  for (const auto& [key, entry] : queued_) {
    if (entry.hold_until < next_queue_expiry_) {
      return "a queue entry expires before next_queue_expiry_";
    }
  }
  if (std::string broken = lease_plan_.broken_invariant(); !broken.empty()) return broken;
  // Every step ends with what it asked served (Router::drain_local).
  return asked_.empty() ? "" : "a step ended with asks unserved";
}

}  // namespace shoal::core::target
