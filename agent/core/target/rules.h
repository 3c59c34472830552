// The target's rules that read no state of its role: functions of a
// reservation's record, of a source's invitation limits, or of the
// cluster.
#pragma once

#include <algorithm>
#include <cstdint>

#include "agent/cluster/cluster.h"
#include "common/time.h"
#include "crypto/invitation.h"
#include "store/records.h"

namespace shoal::core::target {

// When a bound copy that has not started is given up (spec.startTimeout
// after it was bound); TimePoint::max() when it waits as long as it takes.
inline TimePoint start_deadline(const store::ReservationRecord& record) {
  if (record.phase != store::ReservationPhase::kBound || record.spec.start_timeout.count() <= 0) {
    return TimePoint::max();
  }
  return from_millis(record.started_at_ms) + record.spec.start_timeout;
}

// `priority` held to the ceiling of a source's invitation `limits` (null:
// none, or our own cluster), if it has one.
inline int32_t granted_priority(const crypto::InvitationLimits* limits, int32_t priority) {
  if (!limits || !limits->max_priority) return priority;
  return std::min(priority, *limits->max_priority);
}

// A READY's score: how much cpu stays free in `cluster`, 0..100; higher is
// a roomier fit.
double free_cpu_score(const cluster::Cluster& cluster);

}  // namespace shoal::core::target
