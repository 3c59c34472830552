#include "agent/core/source/parking_lot.h"

#include <algorithm>

namespace shoal::core::source {

void ParkingLot::park(SourceWorkload& workload) {
  unpark(workload);
  workload.parked_until = std::max(workload.next_round_at, workload.record.restart_at);
  parked_.emplace(workload.parked_until, workload.record.uid);
}

void ParkingLot::unpark(SourceWorkload& workload) {
  if (workload.parked_until == TimePoint{}) return;
  parked_.erase({workload.parked_until, workload.record.uid});
  workload.parked_until = TimePoint{};
  due_.wake(workload.record.uid);
}

void ParkingLot::wake_due(SourceBook& book, TimePoint now) {
  for (int woken = 0;
       woken < kMostWokenPerTick && !parked_.empty() && parked_.begin()->first <= now;) {
    auto [at, uid] = *parked_.begin();
    parked_.erase(parked_.begin());
    SourceWorkload* found = book.find(uid);
    if (!found || found->parked_until != at) continue;  // stale
    found->parked_until = TimePoint{};
    due_.wake(uid);
    ++woken;
  }
}

std::string ParkingLot::broken_invariant(const SourceBook& book) const {
  size_t parked = 0;
  for (const auto& [uid, workload] : book.entries()) {
    if (workload.parked_until == TimePoint{}) continue;
    ++parked;
    if (!parked_.count({workload.parked_until, uid}))
      return "a parked workload is missing from the parking lot";
  }
  if (parked != parked_.size()) return "the parking lot does not hold each parked workload once";
  return "";
}

}  // namespace shoal::core::source
