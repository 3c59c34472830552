// The target's plan of its sources' leases: the earliest lease end at
// which a copy here may have to be fenced (stopped because its source's
// lease lapsed), so the tick need not walk every source after every step.
//
// The plan holds every future lease end, and an ended one while its source
// still runs work here (a source with no work here costs one early tick
// when its lease ends). Between ticks a lease moves only by
// PeerTable::set_lease, and only later unless it is new or revived; the
// role calls note() for each, and plan() after fencing in the tick.
//
// Invariant (broken_invariant): no lease of a source with bound or running
// copies here ends before next_end().
#pragma once

#include <string>

#include "agent/core/peer_table.h"
#include "agent/core/target/reservation_table.h"
#include "common/time.h"

namespace shoal::core::target {

class LeasePlan {
 public:
  // Reads the leases in `peers` and the copies in `table`.
  LeasePlan(const PeerTable& peers, const ReservationTable& table) : peers_(peers), table_(table) {}

  // `source_id`'s lease was set or renewed: its end joins the plan.
  void note(const std::string& source_id);
  // Plans afresh as of `now` (after fencing, in the tick).
  void plan(TimePoint now);
  // The earliest lease end fencing may have to act on; before it, nothing.
  TimePoint next_end() const { return next_end_; }

  std::string broken_invariant() const;

 private:
  const PeerTable& peers_;
  const ReservationTable& table_;
  TimePoint next_end_ = TimePoint::min();
};

}  // namespace shoal::core::target
