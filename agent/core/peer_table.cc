#include "agent/core/peer_table.h"

#include <algorithm>

namespace shoal::core {

PeerTable::PeerTable(std::string self_id, std::string self_cluster)
    : self_id_(std::move(self_id)), self_cluster_(std::move(self_cluster)) {
  self_prefix_ = TextKey::prefix_of(self_id_);
}

void PeerTable::load(const std::vector<store::PeerRecord>& records) {
  for (const auto& record : records) {
    Row row = make_row(record.id);
    Peer& peer = row->second;
    peer.cluster = record.cluster;
    peer.org = record.org;
    peer.endpoint = record.endpoint;
    peer.last_boot = record.last_boot;
    peer.last_seq = record.last_seq;
    peer.lease_ms = record.lease_ms;
    peer.lease_until_ms = record.lease_until_ms;
    peer.forgotten_at_ms = record.forgotten_at_ms;
    index_lease(row);
  }
}

void PeerTable::index_lease(Row row) {
  Peer& peer = row->second;
  std::optional<TimePoint> ends = lease_end_of(row->first, peer);
  if (!ends && peer.lease_slot == UINT32_MAX) return;
  if (peer.lease_slot == UINT32_MAX) {
    peer.lease_slot = static_cast<uint32_t>(leases_.size());
    leases_.push_back({INT64_MAX, row});
  }
  leases_[peer.lease_slot].until_ms = ends ? peer.lease_until_ms : INT64_MAX;
}

PeerTable::Row PeerTable::make_row(const std::string& id) {
  auto [row, made] = peers_.try_emplace(id);
  if (made) {
    if (auto key = crypto::key_from_text(id, "peer id"); key.is_ok()) {
      row->second.key = *key;
      // Only the key's own spelling: a sender is known by its key's text.
      if (crypto::key_to_text(*key) == id) rows_by_key_.emplace(*key, row);
    }
  }
  return row;
}

void PeerTable::note_unsaved(Row row) {
  if (row->second.unsaved) return;
  row->second.unsaved = true;
  unsaved_.push_back(row);
}

std::optional<PeerTable::Row> PeerTable::find_row(const std::string& id) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return std::nullopt;
  return it;
}

std::optional<PeerTable::Row> PeerTable::find_row(const crypto::PublicKey& key) {
  auto it = rows_by_key_.find(key);
  if (it == rows_by_key_.end()) return std::nullopt;
  return it->second;
}

const PeerTable::Peer* PeerTable::find(const std::string& id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : &it->second;
}

const PeerTable::Peer* PeerTable::note_sending(const std::string& id, TimePoint now) {
  auto it = peers_.find(id);
  if (it == peers_.end() || is_forgotten(it->second)) return nullptr;
  it->second.last_sent_to = now;
  return &it->second;
}

bool PeerTable::remember(const std::string& id, const std::string& cluster, const std::string& org,
                         const std::string& endpoint) {
  return remember(make_row(id), cluster, org, endpoint);
}

bool PeerTable::remember(Row row, const std::string& cluster, const std::string& org,
                         const std::string& endpoint) {
  Peer& peer = row->second;
  if (peer.cluster == cluster && peer.org == org && peer.endpoint == endpoint) return false;
  peer.cluster = cluster;
  peer.org = org;
  peer.endpoint = endpoint;
  note_unsaved(row);
  return true;
}

bool PeerTable::is_fresh(const std::string& id, uint64_t boot, uint64_t seq) const {
  const Peer* peer = find(id);
  return peer && is_fresh(*peer, boot, seq);
}

bool PeerTable::is_fresh(const Peer& peer, uint64_t boot, uint64_t seq) {
  if (boot != peer.last_boot) return boot > peer.last_boot;
  if (seq > peer.last_seq) return true;
  uint64_t behind = peer.last_seq - seq;
  return behind < kReplayWindow && ((peer.seen >> behind) & 1) == 0;
}

Duration PeerTable::accept(const std::string& id, uint64_t boot, uint64_t seq,
                           int64_t sent_at_ms, TimePoint now) {
  return accept(make_row(id), boot, seq, sent_at_ms, now);
}

Duration PeerTable::accept(Row row, uint64_t boot, uint64_t seq, int64_t sent_at_ms,
                           TimePoint now) {
  Peer& peer = row->second;
  TimePoint silent_since = listening_since_;
  if (peer.last_seen) silent_since = std::max(silent_since, *peer.last_seen);
  if (boot != peer.last_boot) {
    peer.last_boot = boot;
    peer.last_seq = seq;
    peer.seen = 1;
    peer.newest_sent_at_ms = sent_at_ms;
  } else if (seq > peer.last_seq) {
    uint64_t ahead = seq - peer.last_seq;
    peer.seen = ahead >= kReplayWindow ? 1 : (peer.seen << ahead) | 1;
    peer.last_seq = seq;
  } else {
    peer.seen |= uint64_t{1} << (peer.last_seq - seq);
  }
  peer.newest_sent_at_ms = std::max(peer.newest_sent_at_ms, sent_at_ms);
  peer.last_seen = now;
  note_unsaved(row);
  return is_self(row->first) ? Duration{0} : now - silent_since;
}

void PeerTable::note_read(const std::string& id, uint64_t acked_boot, int64_t acked_sent_at_ms,
                          uint64_t own_boot, TimePoint now) {
  note_read(at(id), acked_boot, acked_sent_at_ms, own_boot, now);
}

void PeerTable::note_read(Peer& peer, uint64_t acked_boot, int64_t acked_sent_at_ms,
                          uint64_t own_boot, TimePoint now) {
  TimePoint read = from_millis(acked_sent_at_ms);
  if (acked_boot != own_boot || read <= peer.read_until) return;
  peer.read_until = read;
  peer.read_progress_at = now;
}

TimePoint PeerTable::hold_resend_until(const std::string& id, TimePoint last_sent,
                                       Duration stall) const {
  const Peer* peer = find(id);
  bool never_acknowledged = !peer || peer->read_progress_at == TimePoint{};
  if (never_acknowledged || peer->read_until >= last_sent) return TimePoint{};
  return peer->read_progress_at + stall;
}

bool PeerTable::greet(Peer& peer) {
  bool first = peer.greeted_boot != peer.last_boot;
  peer.greeted_boot = peer.last_boot;
  return first;
}

void PeerTable::set_lease(const std::string& id, int64_t lease_ms, int64_t lease_until_ms) {
  auto row = make_row(id);
  Peer& peer = row->second;
  if (peer.lease_ms == lease_ms && peer.lease_until_ms == lease_until_ms) return;
  peer.lease_ms = lease_ms;
  peer.lease_until_ms = lease_until_ms;
  index_lease(row);
  note_unsaved(row);
}

std::optional<TimePoint> PeerTable::lease_end_of(const std::string& id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? std::nullopt : lease_end_of(it->first, it->second);
}

std::optional<TimePoint> PeerTable::lease_end_of(const TextKey& id, const Peer& peer) const {
  if (peer.lease_ms == 0 || is_self(id)) return std::nullopt;
  return from_millis(peer.lease_until_ms);
}

std::optional<Duration> PeerTable::notice_tick(TimePoint now, Duration heartbeat) {
  std::optional<Duration> gap;
  if (last_tick_ != TimePoint{} && now - last_tick_ > heartbeat) {
    gap = now - last_tick_;
    listening_since_ = now;
  }
  last_tick_ = now;
  return gap;
}

Duration PeerTable::silent_for(const std::string& id, TimePoint now) const {
  if (id == self_id_) return Duration{0};
  TimePoint since = listening_since_;
  if (const Peer* peer = find(id); peer && peer->last_seen)
    since = std::max(since, *peer->last_seen);
  return now - since;
}

bool PeerTable::forget(const std::string& id, TimePoint now) {
  auto row = find_row(id);
  if (!row || is_self((*row)->first) || is_forgotten((*row)->second)) return false;
  // 0 means "not forgotten": a clock at the epoch still marks the row.
  (*row)->second.forgotten_at_ms = std::max<int64_t>(to_millis(now), 1);
  note_unsaved(*row);
  return true;
}

bool PeerTable::unforget(const std::string& id) {
  auto row = find_row(id);
  if (!row || !is_forgotten((*row)->second)) return false;
  (*row)->second.forgotten_at_ms = 0;
  note_unsaved(*row);
  return true;
}

std::optional<TimePoint> PeerTable::forgotten_at(const std::string& id) const {
  const Peer* peer = find(id);
  if (!peer || !is_forgotten(*peer)) return std::nullopt;
  return from_millis(peer->forgotten_at_ms);
}

std::string PeerTable::cluster_name_of(const std::string& id) const {
  if (id == self_id_) return self_cluster_;
  const Peer* peer = find(id);
  return peer ? peer->cluster : id.substr(0, 8);
}

Status PeerTable::flush(store::Store& store) {
  Status first = Status::ok();
  for (auto row : unsaved_) {
    const std::string& id = row->first;
    Peer& peer = row->second;
    peer.unsaved = false;
    Status written =
        store.put_peer({id, peer.cluster, peer.org, peer.endpoint, peer.last_boot, peer.last_seq,
                        peer.lease_ms, peer.lease_until_ms, peer.forgotten_at_ms});
    if (!written.is_ok() && first.is_ok()) first = written;
  }
  unsaved_.clear();
  return first;
}

std::string PeerTable::broken_invariant() const {
  auto marked = static_cast<size_t>(std::count_if(
      peers_.begin(), peers_.end(), [](const auto& entry) { return entry.second.unsaved; }));
  if (marked != unsaved_.size()) return "the unsaved list and the rows marked unsaved differ";
  size_t keyed = 0;
  for (auto row = peers_.begin(); row != peers_.end(); ++row) {
    const std::optional<crypto::PublicKey>& key = row->second.key;
    if (!key || crypto::key_to_text(*key) != row->first.text()) continue;
    ++keyed;
    auto indexed = rows_by_key_.find(*key);
    if (indexed == rows_by_key_.end() || indexed->second != row) {
      return "peer " + row->first.text() + " is not found by its key";
    }
  }
  if (keyed != rows_by_key_.size()) return "the key index lists rows that are not peers";
  for (auto row = peers_.begin(); row != peers_.end(); ++row) {
    std::optional<TimePoint> ends = lease_end_of(row->first, row->second);
    uint32_t slot = row->second.lease_slot;
    if (slot == UINT32_MAX ? ends.has_value()
                           : slot >= leases_.size() || leases_[slot].row != row ||
                                 from_millis(leases_[slot].until_ms) != ends.value_or(TimePoint::max())) {
      return "the lease of peer " + row->first.text() + " is not as leases() lists it";
    }
  }
  return "";
}

}  // namespace shoal::core
