#include "tests/sim/memory_store.h"

#include <optional>

namespace shoal::sim {

template <typename Map, typename Key, typename Value>
void MemoryStore::write(Map& table, const Key& key, const Value* value) {
  // One lookup per write: every envelope read writes its sender's row.
  auto it = table.lower_bound(key);
  bool found = it != table.end() && !(table.key_comp()(key, it->first));
  if (in_batch_) {
    std::optional<Value> before;
    if (found) before = it->second;
    undo_.push_back([&table, key, before = std::move(before)] {
      if (before)
        table[key] = *before;
      else
        table.erase(key);
    });
  }
  if (!value) {
    if (found) table.erase(it);
  } else if (found) {
    it->second = *value;
  } else {
    table.emplace_hint(it, key, *value);
  }
}

Status MemoryStore::begin() {
  if (in_batch_) return internal_error("store: a batch is already open");
  in_batch_ = true;
  return Status::ok();
}

namespace {

Status disk_full() { return Status(ErrorCode::kStorage, "simulated disk failure: database or disk is full"); }

}  // namespace

Status MemoryStore::refuse_write() const {
  return failure_ == Failure::kWrites ? disk_full() : Status::ok();
}

Status MemoryStore::probe_write() const {
  return failure_ == Failure::kNone ? Status::ok() : disk_full();
}

Status MemoryStore::commit() {
  if (!in_batch_) return internal_error("store: no batch open");
  bool empty = undo_.empty() && pending_peer_count_ == 0;
  // An empty batch touches no page, so even a failing disk commits it.
  if (failure_ == Failure::kCommit && !empty) {
    return Status(ErrorCode::kStorage, "simulated disk failure: disk I/O error at commit");
  }
  in_batch_ = false;
  if (empty)
    ++stats_.empty;
  else
    ++stats_.written;
  undo_.clear();
  for (size_t i = 0; i < pending_peer_count_; ++i) apply_peer(pending_peers_[i]);
  pending_peer_count_ = 0;
  return Status::ok();
}

void MemoryStore::rollback() {
  if (!in_batch_) return;
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)();
  undo_.clear();
  pending_peer_count_ = 0;
  in_batch_ = false;
}

Result<uint64_t> MemoryStore::next_boot() {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  uint64_t before = boot_;
  if (in_batch_) undo_.push_back([this, before] { boot_ = before; });
  return ++boot_;
}

void MemoryStore::apply_peer(const store::PeerRecord& peer) {
  if (auto it = peers_.find(peer.id); it != peers_.end()) {
    it->second = peer;  // assigned, not replaced: its strings keep their room
  } else {
    peers_.emplace(peer.id, peer);
  }
}

Status MemoryStore::put_peer(const store::PeerRecord& peer) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  if (!in_batch_) {
    apply_peer(peer);
  } else if (pending_peer_count_ < pending_peers_.size()) {
    pending_peers_[pending_peer_count_++] = peer;
  } else {
    pending_peers_.push_back(peer);
    ++pending_peer_count_;
  }
  return Status::ok();
}

Result<std::vector<store::PeerRecord>> MemoryStore::load_peers() {
  // As the batch would leave them: the committed rows, then its own writes;
  // sorted by id, so a restart reads them in one order whatever the hashing.
  std::map<std::string, store::PeerRecord> rows(peers_.begin(), peers_.end());
  for (size_t i = 0; i < pending_peer_count_; ++i) {
    rows.insert_or_assign(pending_peers_[i].id, pending_peers_[i]);
  }
  std::vector<store::PeerRecord> out;
  for (const auto& [id, peer] : rows) out.push_back(peer);
  return out;
}

Status MemoryStore::put_invitation(const store::InvitationRecord& invitation) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  write(invitations_, std::pair{invitation.id, static_cast<int>(invitation.direction)},
        &invitation);
  return Status::ok();
}

Result<std::vector<store::InvitationRecord>> MemoryStore::load_invitations() {
  std::vector<store::InvitationRecord> out;
  for (const auto& [key, invitation] : invitations_) out.push_back(invitation);
  return out;
}

Status MemoryStore::put_workload(const store::WorkloadRecord& workload) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  write(workloads_, workload.uid, &workload);
  return Status::ok();
}

Status MemoryStore::update_workload_status(const store::WorkloadRecord& workload) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  auto it = workloads_.find(workload.uid);
  if (it == workloads_.end()) return not_found("workload " + workload.uid + " is not stored");
  // As SqliteStore: what never changes after put_workload stays as stored.
  store::WorkloadRecord updated = workload;
  updated.spec = it->second.spec;
  updated.created_at = it->second.created_at;
  updated.parent = it->second.parent;
  updated.copy_index = it->second.copy_index;
  write(workloads_, workload.uid, &updated);
  return Status::ok();
}

Result<std::vector<store::WorkloadRecord>> MemoryStore::load_workloads() {
  std::vector<store::WorkloadRecord> out;
  for (const auto& [uid, workload] : workloads_) out.push_back(workload);
  return out;
}

Status MemoryStore::delete_workload(const std::string& uid) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  write(workloads_, uid, static_cast<const store::WorkloadRecord*>(nullptr));
  return Status::ok();
}

Status MemoryStore::update_reservation_status(const store::ReservationRecord& reservation) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  auto it = reservations_.find(std::pair{reservation.source, reservation.uid});
  if (it == reservations_.end()) {
    return not_found("reservation " + reservation.source + "/" + reservation.uid + " is not stored");
  }
  // As SqliteStore: the spec stays as last written.
  store::ReservationRecord updated = reservation;
  updated.spec = it->second.spec;
  return put_reservation(updated);
}

Status MemoryStore::put_reservation(const store::ReservationRecord& reservation) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  write(reservations_, std::pair{reservation.source, reservation.uid}, &reservation);
  if (reservation.phase == store::ReservationPhase::kReserved) return Status::ok();
  store::RunRecord run;
  run.source = reservation.source;
  run.uid = reservation.uid;
  run.epoch = reservation.epoch;
  run.namespace_name = reservation.spec.namespace_name;
  run.name = reservation.spec.name;
  run.per_replica = reservation.spec.resources;
  run.nodes = reservation.nodes;
  run.started_at_ms = reservation.started_at_ms;
  run.finished_at_ms = reservation.finished_at_ms;
  run.phase = std::string(store::kReservationPhaseNames[static_cast<size_t>(reservation.phase)]);
  run.message = reservation.message;
  write(runs_, std::tuple{run.started_at_ms, run.source, run.uid}, &run);
  return Status::ok();
}

Status MemoryStore::delete_reservation(const std::string& source, const std::string& uid) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  write(reservations_, std::pair{source, uid},
        static_cast<const store::ReservationRecord*>(nullptr));
  return Status::ok();
}

Status MemoryStore::put_quota(const model::QuotaSpec& quota) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  write(quotas_, quota.namespace_name, &quota);
  return Status::ok();
}

Status MemoryStore::delete_quota(const std::string& namespace_name) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  write(quotas_, namespace_name, static_cast<const model::QuotaSpec*>(nullptr));
  return Status::ok();
}

Result<std::vector<model::QuotaSpec>> MemoryStore::load_quotas() {
  std::vector<model::QuotaSpec> out;
  for (const auto& [name, quota] : quotas_) out.push_back(quota);
  return out;
}

Result<std::vector<store::ReservationRecord>> MemoryStore::load_reservations() {
  std::vector<store::ReservationRecord> out;
  for (const auto& [key, reservation] : reservations_) out.push_back(reservation);
  return out;
}

Result<std::vector<store::RunRecord>> MemoryStore::load_runs() {
  std::vector<store::RunRecord> out;
  for (const auto& [key, run] : runs_) out.push_back(run);
  return out;
}

Status MemoryStore::append_event(const store::EventRecord& event) {
  SHOAL_RETURN_IF_ERROR(refuse_write());
  std::deque<store::EventRecord>& events = events_[event.subject];
  events.push_back(event);
  std::optional<store::EventRecord> dropped;
  if (events.size() > static_cast<size_t>(kEventsPerSubject)) {
    dropped = std::move(events.front());
    events.pop_front();
  }
  if (in_batch_) {
    undo_.push_back([this, subject = event.subject, dropped] {
      std::deque<store::EventRecord>& list = events_[subject];
      list.pop_back();
      if (dropped) list.push_front(*dropped);
      if (list.empty()) events_.erase(subject);
    });
  }
  return Status::ok();
}

Result<std::vector<store::EventRecord>> MemoryStore::load_events(const std::string& subject) {
  auto it = events_.find(subject);
  if (it == events_.end()) return std::vector<store::EventRecord>{};
  return std::vector<store::EventRecord>(it->second.begin(), it->second.end());
}

}  // namespace shoal::sim
