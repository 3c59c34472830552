// The target role, priorities and preemption: a priority changed at the
// source re-files queued work, an invitation caps a guest's priority and
// says whom it may preempt, and a READY offering to preempt is carried out
// only on its APPROVE.
#include <algorithm>

#include "agent/core/target/role.h"

namespace shoal::core::target {

void TargetRole::take_priority(const ReservationKey& key, uint64_t epoch, int32_t priority) {
  priority = granted_priority(guest_limits(key.first), priority);
  auto queued = queued_.find(key);
  if (queued != queued_.end() && queued->second.epoch <= epoch &&
      queued->second.spec.priority != priority) {
    QueuedCandidate entry = queued->second;
    context_.record_event(key.second, "priority " + std::to_string(priority) + " (was " +
                                          std::to_string(entry.spec.priority) +
                                          "): queued again at " + config_.cluster +
                                          " in that order");
    entry.spec.priority = priority;
    unqueue(queued);
    queue_candidate(key, std::move(entry));
  }
  auto it = table_.entries().find(key);
  if (it == table_.entries().end()) return;
  store::ReservationRecord& record = it->second.record;
  if (record.epoch > epoch || !store::holds_resources(record.phase) ||
      record.spec.priority == priority) {
    return;
  }
  context_.record_event(key.second, "priority " + std::to_string(priority) + " (was " +
                                        std::to_string(record.spec.priority) + ") at " +
                                        config_.cluster);
  record.spec.priority = priority;
  persist_with_spec(record);
  // Lowered, it may now be what a waiting candidate preempts; raised, no
  // longer. The cluster plans preemption from what it holds.
  cluster_.set_priority(cluster_key(key.first, key.second), priority);
}

void TargetRole::on_priority(const std::string& from, const protocol::Priority& message) {
  take_priority({from, message.uid}, message.epoch, message.priority);
}

const crypto::InvitationLimits* TargetRole::guest_limits(const std::string& source) const {
  if (source == self_id_) return nullptr;
  const crypto::InvitationLimits* limits = nullptr;
  for (const auto* invitation : invitations_.valid_issued(source, clock_.now())) {
    limits = &invitation->limits;  // the newest valid one decides
  }
  return limits;
}

std::function<bool(const std::string&)> TargetRole::may_preempt_for(const std::string& source) const {
  const crypto::InvitationLimits* own = guest_limits(source);
  bool ranks_above_guests = source == self_id_ || (own && !own->preemptible);
  return [this, source, ranks_above_guests](const std::string& victim) {
    std::string victim_source = victim.substr(0, victim.find('/'));
    if (victim_source == source) return true;
    if (!ranks_above_guests || victim_source == self_id_) return false;
    const crypto::InvitationLimits* limits = guest_limits(victim_source);
    return limits && limits->preemptible;
  };
}

bool TargetRole::offer_preemption(const ReservationKey& key, QueuedCandidate& entry) {
  if (!cluster_.spec().preemption.enabled()) return false;
  std::optional<cluster::PreemptionCost> cost =
      cluster_.preemption_cost(entry.spec, may_preempt_for(key.first));
  if (!cost) return false;
  entry.offered_preemption = true;
  context_.send(key.first,
                protocol::Ready{key.second, entry.epoch, free_cpu_score(cluster_),
                                static_cast<uint32_t>(cost->victims), cost->highest_priority});
  return true;
}

bool TargetRole::approve_by_preemption(const ReservationKey& key, const protocol::Approve& message) {
  auto queued = queued_.find(key);
  QueuedCandidate entry = queued->second;  // unqueue reads its spec
  unqueue(queued);
  auto refuse = [&](const std::string& why) {
    context_.record_event(key.second, "approval at " + config_.cluster + " refused: " + why);
    context_.send(key.first,
                  protocol::Reject{message.uid, message.epoch, "ReservationExpired: " + why,
                                   protocol::RejectCode::kReservationExpired});
  };
  if (Refusal refusal = reject_reason_for(key.first, entry.spec); refusal) {
    refuse(refusal.reason);
    return false;
  }
  std::string ckey = cluster_key(key.first, key.second);
  // Room may have freed since the offer: then nothing need be stopped.
  Result<std::vector<std::string>> free = cluster_.reserve(ckey, entry.spec);
  if (free.is_ok()) {
    file_reservation(key, entry.epoch, entry.spec, std::move(*free));
    return true;
  }
  Result<cluster::Preemption> done = cluster_.preempt(ckey, entry.spec, may_preempt_for(key.first), clock_.now());
  if (!done.is_ok()) {
    refuse(done.status().message());
    return false;
  }
  ++context_.stats().preemptions;
  context_.stats().preempted_victims += done->victims.size();
  for (const std::string& victim : done->victims) {
    size_t slash = victim.find('/');
    if (slash == std::string::npos) continue;
    // Written with the preemptor's reservation: a restart before the
    // victim is gone stops it again and keeps its room until then
    // (restore). Its source hears nothing until it is gone.
    if (auto it = table_.entries().find({victim.substr(0, slash), victim.substr(slash + 1)});
        it != table_.entries().end()) {
      store::ReservationRecord& record = it->second.record;
      record.condition = static_cast<uint8_t>(protocol::CopyCondition::kPreempted);
      record.message = "Preempted: stopping for work of priority " + std::to_string(entry.spec.priority);
      persist(record);
    }
    context_.record_event(victim.substr(slash + 1),
                          "preempted at " + config_.cluster + " for work of priority " +
                              std::to_string(entry.spec.priority) + ": stopping");
  }
  context_.record_event(key.second, "stopping " + std::to_string(done->victims.size()) +
                                        " workload(s) of lower priority at " + config_.cluster +
                                        " to make room; it starts once they are gone");
  file_reservation(key, entry.epoch, entry.spec, std::move(done->nodes));
  return true;
}

}  // namespace shoal::core::target
