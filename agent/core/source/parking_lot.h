// Pending workloads that wait only for a time (their next round or their
// restart): parked, they leave the timers' index until then, so an agent
// with 100,000 such workloads does not visit them on every tick, and are
// woken, a bounded herd per tick, when their time comes.
//
// Invariant (broken_invariant): every workload whose parked_until is set
// has its entry here, and there is no other entry.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <utility>

#include "agent/core/source/book.h"
#include "agent/core/source/due_index.h"
#include "agent/core/source/workload.h"
#include "common/time.h"

namespace shoal::core::source {

class ParkingLot {
 public:
  explicit ParkingLot(DueIndex& due) : due_(due) {}

  // Parks it until the later of its next round and its restart time.
  void park(SourceWorkload& workload);
  // Takes it out (a change, a message, a delete): awake again.
  void unpark(SourceWorkload& workload);
  // Wakes those whose time has come, at most kMostWokenPerTick: work
  // submitted together parks until the same instant, and 20,000 woken in
  // one tick held the loop (control requests, peers) for a quarter of a
  // second. The rest stay due (next_wake() is now).
  static constexpr int kMostWokenPerTick = 1000;
  void wake_due(SourceBook& book, TimePoint now);
  // The earliest wake (TimePoint::max(): none parked).
  TimePoint next_wake() const {
    return parked_.empty() ? TimePoint::max() : parked_.begin()->first;
  }
  size_t size() const { return parked_.size(); }

  // "" while every invariant holds, else the first broken one.
  std::string broken_invariant(const SourceBook& book) const;

 private:
  DueIndex& due_;
  std::set<std::pair<TimePoint, std::string>> parked_;  // (parked_until, uid)
};

}  // namespace shoal::core::source
