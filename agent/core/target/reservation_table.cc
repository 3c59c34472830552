#include "agent/core/target/reservation_table.h"

namespace shoal::core::target {

model::Phase ReservationTable::source_phase(store::ReservationPhase phase) {
  switch (phase) {
    case store::ReservationPhase::kReserved:
      return model::Phase::kPlacing;
    case store::ReservationPhase::kBound:
      return model::Phase::kBound;
    case store::ReservationPhase::kRunning:
      return model::Phase::kRunning;
    case store::ReservationPhase::kSucceeded:
      return model::Phase::kSucceeded;
    case store::ReservationPhase::kFailed:
      return model::Phase::kFailed;
  }
  return model::Phase::kFailed;
}

ReservationTable::Entry* ReservationTable::find(const Key& key) {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

ReservationTable::Entry& ReservationTable::file(const Key& key, Entry entry) {
  Entry& filed = entries_[key] = std::move(entry);
  follow(filed.record);
  return filed;
}

void ReservationTable::follow(const store::ReservationRecord& record) {
  Key key{record.source, record.uid};
  if (counts_.follow(record)) counts_moved_ = true;
  bool counted = counted_.count(key) > 0;
  if (store::holds_resources(record.phase) == counted) return;
  if (counted) return unaccount(key);
  model::Resources total = record.spec.total();
  counted_[key] = total;
  InvitationUsage& held = held_[record.source];
  held.resources += total;
  held.workloads += 1;
}

void ReservationTable::erase(const Key& key) {
  entries_.erase(key);
  if (counts_.forget(key)) counts_moved_ = true;
  unaccount(key);
}

void ReservationTable::unaccount(const Key& key) {
  auto it = counted_.find(key);
  if (it == counted_.end()) return;
  InvitationUsage& held = held_[key.first];
  held.resources -= it->second;
  held.workloads -= 1;
  counted_.erase(it);
}

InvitationUsage ReservationTable::usage_of(const std::string& source) const {
  auto row = held_.find(source);
  return row == held_.end() ? InvitationUsage{} : row->second;
}

std::string ReservationTable::broken_invariant() const {
  std::map<std::string, InvitationUsage> held;
  for (const auto& [key, entry] : entries_) {
    if (key.first != entry.record.source || key.second != entry.record.uid) {
      return "a reservation is filed under another key";
    }
    if (!store::holds_resources(entry.record.phase)) continue;
    held[key.first].resources += entry.record.spec.total();
    held[key.first].workloads += 1;
  }
  for (const auto& [source, row] : held_) {
    const InvitationUsage& sum = held.contains(source) ? held.at(source) : InvitationUsage{};
    if (!(row.resources == sum.resources) || row.workloads != sum.workloads) {
      return "a source's held differs from the sum of its reservations that hold resources";
    }
  }
  for (const auto& [source, sum] : held) {
    if (!held_.contains(source)) return "a source holds resources that held does not count";
  }
  return "";
}

}  // namespace shoal::core::target
