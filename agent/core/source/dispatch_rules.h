// The dispatchers' rules over one workload and the agent's config
// (docs/lifecycle.md, "Dispatchers"): which dispatcher a workload uses,
// how long a wave of candidates is given, how long READYs wait for the
// first-ranked target, and the backoff before a Pending round. They read
// no state of the role, so they are functions, not its methods.
#pragma once

#include <chrono>

#include "agent/core/config.h"
#include "agent/core/source/workload.h"
#include "common/time.h"
#include "model/placement_spec.h"
#include "store/records.h"

namespace shoal::core::source {

inline model::Dispatcher dispatcher_of(const store::WorkloadRecord& record,
                                       const AgentConfig& config) {
  return record.spec.placement.dispatcher.value_or(config.default_dispatcher);
}

// How long a batch of candidates is given before the next is asked.
Duration wave_timeout(const store::WorkloadRecord& record, const AgentConfig& config);

// Whether a Preferred round asks its first-ranked target alone first;
// `queueing`: nobody has room, so every target that would queue it is asked.
bool asks_preferred_alone(const SourceWorkload& workload, bool queueing, const AgentConfig& config);

// Whether READYs of this round still wait, for less than preferredWait
// since the first READY (AgentConfig::preferred_wait): for the round's
// first-ranked target, which has not answered READY but still may (not
// asked back yet, or queued); or, while every READY offers only to
// preempt, for a target that has not answered and may hold room.
bool waits_for_preferred(const SourceWorkload& workload, TimePoint now, const AgentConfig& config);

// When that wait ends (unless the first-ranked answers first), rounded up
// to a tick of kHoldGranularity, so that the holds that end close together
// end in one step and their APPROVEs and CANCELs share envelopes (one
// signature, one commit).
inline constexpr Duration kHoldGranularity = std::chrono::milliseconds(50);
TimePoint hold_until(const SourceWorkload& workload, const AgentConfig& config);

// pendingRetry doubled `doublings` times, at most pendingRetryMax: the wait
// before a Pending round and before a restart.
Duration backoff(int doublings, const AgentConfig& config);

}  // namespace shoal::core::source
