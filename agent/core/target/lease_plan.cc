#include "agent/core/target/lease_plan.h"

#include <algorithm>
#include <optional>

namespace shoal::core::target {

void LeasePlan::note(const std::string& source_id) {
  if (std::optional<TimePoint> ends = peers_.lease_end_of(source_id)) {
    next_end_ = std::min(next_end_, *ends);
  }
}

void LeasePlan::plan(TimePoint now) {
  next_end_ = TimePoint::max();
  for (const PeerTable::Lease& lease : peers_.leases()) {
    TimePoint ends = from_millis(lease.until_ms);
    if (ends >= next_end_) continue;
    // An ended lease matters only while the source still runs work here
    // (fencing stops bound and running copies, nothing else).
    if (ends <= now && !table_.runs_work_of(lease.row->first)) continue;
    next_end_ = ends;
  }
}

std::string LeasePlan::broken_invariant() const {
  for (const auto& [id, peer] : peers_.all()) {
    std::optional<TimePoint> ends = peers_.lease_end_of(id, peer);
    if (ends && *ends < next_end_ && table_.runs_work_of(id)) {
      return "a lease of a source with work here ends before the plan's next end";
    }
  }
  return "";
}

}  // namespace shoal::core::target
