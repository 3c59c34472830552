#include "agent/core/source/target_ledger.h"

#include <algorithm>
#include <optional>

namespace shoal::core::source {

const TargetLedger::Target* TargetLedger::find(const std::string& peer) const {
  auto it = targets_.find(peer);
  return it == targets_.end() ? nullptr : &it->second;
}

std::vector<std::string> TargetLedger::advertised(const std::string& peer,
                                                  const protocol::Capacity& message) {
  Target& target = targets_[peer];
  // In place when it names the namespaces it named last time, in the same
  // order (every CAPACITY but the first): no map rebuilt, and each entry's
  // queues keep their room. Otherwise (the first, or a change) afresh.
  bool same_namespaces = target.capacity.size() == message.namespaces.size() &&
                         std::equal(message.namespaces.begin(), message.namespaces.end(),
                                    target.capacity.begin(), [](const auto& ns, const auto& entry) {
                                      return ns.namespace_name == entry.first;
                                    });
  if (same_namespaces) {
    auto entry = target.capacity.begin();
    for (const auto& ns : message.namespaces) (entry++)->second = ns;
  } else {
    target.capacity.clear();
    for (const auto& ns : message.namespaces) target.capacity[ns.namespace_name] = ns;
  }
  if (message.cluster) {
    // Labels and claims left out mean "as last sent".
    std::optional<model::Labels> labels =
        message.cluster->labels ? message.cluster->labels : target.facts.labels;
    std::optional<model::Labels> claims =
        message.cluster->claims ? message.cluster->claims : target.facts.claims;
    target.facts = *message.cluster;
    target.facts.labels = std::move(labels);
    target.facts.claims = std::move(claims);
    target.heard_facts = true;
  }
  std::vector<std::string> acknowledged = std::move(target.acknowledged);
  target.acknowledged.clear();
  return acknowledged;
}

void TargetLedger::acknowledge(const std::string& peer, const std::string& uid) {
  targets_[peer].acknowledged.push_back(uid);
}

void TargetLedger::forget_capacity(const std::string& peer) {
  auto it = targets_.find(peer);
  if (it != targets_.end()) it->second.capacity.clear();
}

std::vector<protocol::NamespaceCapacity> TargetLedger::capacity_of(const std::string& peer) const {
  std::vector<protocol::NamespaceCapacity> out;
  if (const Target* target = find(peer)) {
    for (const auto& [ns, capacity] : target->capacity) out.push_back(capacity);
  }
  return out;
}

void TargetLedger::expect(const std::string& peer, const model::WorkloadSpec& spec, int64_t sign) {
  Target& target = targets_[peer];
  model::Resources total = spec.total();
  model::UsageCounts delta{sign, sign * total.cpu_milli, sign * total.memory_bytes, 0};
  target.unadvertised += delta;
  target.unadvertised_by_namespace[spec.namespace_name] += delta;
  target.unadvertised_by_queue[{spec.namespace_name, spec.queue}] += sign;
  if (sign > 0) {
    target.unadvertised_room += total;
  } else {
    target.unadvertised_room -= total;
  }
}

TimePoint TargetLedger::last_digest_sent(const std::string& peer) const {
  const Target* target = find(peer);
  return target ? target->last_digest_sent : TimePoint{};
}

std::string TargetLedger::broken_invariant() const {
  for (const auto& [peer, target] : targets_) {
    if (target.ours < 0) return "fewer than none of ours counted at a target";
    const model::UsageCounts& unadvertised = target.unadvertised;
    if (unadvertised.workloads < 0 || unadvertised.cpu_milli < 0 || unadvertised.memory_bytes < 0) {
      return "fewer than none of ours counted as unadvertised at a target";
    }
    if (unadvertised.workloads == 0 && !(target.unadvertised_room == model::Resources{})) {
      return "room held for unadvertised work at a target with none";
    }
  }
  return "";
}

void TargetLedger::expect_at(SourceWorkload& workload, const std::string& peer_id) {
  if (workload.expected_at == peer_id) return;
  const model::WorkloadSpec& spec = workload.record.spec;
  if (!workload.expected_at.empty()) expect(workload.expected_at, spec, -1);
  workload.expected_at = peer_id;
  workload.acknowledged = false;
  if (!peer_id.empty()) expect(peer_id, spec, 1);
}

void TargetLedger::follow(SourceWorkload& workload) {
  const store::WorkloadRecord& record = workload.record;
  bool over = record.deleting || model::is_finished(record.phase);
  bool placing = record.phase == model::Phase::kPlacing && !is_group(workload);
  if (record.winner.empty()) workload.advertised_by.clear();
  if (over || record.phase == model::Phase::kPending) {
    expect_at(workload, "");
  } else if (!record.winner.empty()) {
    // Until its winner's CAPACITY counts it (then never again).
    if (workload.advertised_by != record.winner) expect_at(workload, record.winner);
  } else if (placing && !workload.preferred.empty()) {
    expect_at(workload, workload.preferred);
  }
  std::string counted;
  if (!over && !record.winner.empty())
    counted = record.winner;
  else if (!over && placing)
    counted = workload.preferred;
  if (counted != workload.counted_at) {
    if (!workload.counted_at.empty()) count_ours(workload.counted_at, -1);
    if (!counted.empty()) count_ours(counted, 1);
    workload.counted_at = counted;
  }
}

}  // namespace shoal::core::source
