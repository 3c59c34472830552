#include "agent/core/source/dispatch_rules.h"

#include <algorithm>

namespace shoal::core::source {

Duration wave_timeout(const store::WorkloadRecord& record, const AgentConfig& config) {
  // Preferred: the first-ranked had its preferredWait; then everyone else.
  if (dispatcher_of(record, config) == model::Dispatcher::kPreferred) return config.preferred_wait;
  return record.spec.placement.round_timeout;
}

bool asks_preferred_alone(const SourceWorkload& workload, bool queueing,
                          const AgentConfig& config) {
  // Only while the first-ranked has room to offer: when nobody has, every
  // target that would queue it is asked (each keeps it in line). A
  // readyWindow compares several READYs, and preferredWait 0 takes the
  // first READY of any target: both need everyone asked at once.
  return !queueing && config.preferred_wait.count() > 0 &&
         workload.record.spec.placement.ready_window.count() == 0;
}

bool waits_for_preferred(const SourceWorkload& workload, TimePoint now, const AgentConfig& config) {
  if (config.preferred_wait.count() <= 0 || workload.first_ready_at == TimePoint{}) return false;
  if (now >= hold_until(workload, config)) return false;
  auto may_answer = [](const CandidateProgress& progress) {
    return progress.state == CandidateState::kSent ||
           (progress.state == CandidateState::kRejected &&
            progress.code == protocol::RejectCode::kNoCapacity);
  };
  auto preferred = workload.candidates.find(workload.preferred);
  if (preferred != workload.candidates.end() && may_answer(preferred->second)) return true;
  bool offers = false, room_held = false, another_may_answer = false;
  for (const auto& [peer_id, progress] : workload.candidates) {
    if (progress.state == CandidateState::kReady)
      (progress.victims > 0 ? offers : room_held) = true;
    if (progress.state == CandidateState::kSent) another_may_answer = true;
  }
  return offers && !room_held && another_may_answer;
}

TimePoint hold_until(const SourceWorkload& workload, const AgentConfig& config) {
  TimePoint end =
      (workload.asked_preferred_alone ? workload.round_started : workload.first_ready_at) +
      config.preferred_wait;
  auto ticks = (end.time_since_epoch() + kHoldGranularity - Duration(1)) / kHoldGranularity;
  return TimePoint(ticks * kHoldGranularity);
}

Duration backoff(int doublings, const AgentConfig& config) {
  Duration wait = config.pending_retry;
  for (int i = 0; i < doublings && wait < config.pending_retry_max; ++i) wait *= 2;
  return std::min(wait, config.pending_retry_max);
}

}  // namespace shoal::core::source
