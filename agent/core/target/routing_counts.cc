#include "agent/core/target/routing_counts.h"

namespace shoal::core::target {

void RoutingCounts::count(const Usage& usage, int64_t sign, bool queued) {
  model::UsageCounts delta;
  if (queued) {
    delta.queued = sign;
    queued_by_queue_[{usage.namespace_name, usage.queue}] += sign;
  } else {
    delta.workloads = sign;
    delta.cpu_milli = sign * usage.total.cpu_milli;
    delta.memory_bytes = sign * usage.total.memory_bytes;
  }
  by_namespace_[usage.namespace_name] += delta;
  cluster_ += delta;
  by_queue_[{usage.namespace_name, usage.queue}] += sign;
  ++version_;
}

bool RoutingCounts::follow(const store::ReservationRecord& record) {
  Key key{record.source, record.uid};
  bool in_use = record.phase == store::ReservationPhase::kBound ||
                record.phase == store::ReservationPhase::kRunning;
  auto counted = in_use_.find(key);
  if (in_use && counted == in_use_.end()) {
    Usage usage{record.spec.namespace_name, record.spec.queue, record.spec.total()};
    count(usage, 1, /*queued=*/false);
    in_use_.emplace(key, std::move(usage));
    return true;
  }
  if (!in_use && counted != in_use_.end()) {
    count(counted->second, -1, /*queued=*/false);
    in_use_.erase(counted);
    return true;
  }
  return false;
}

bool RoutingCounts::forget(const Key& key) {
  auto counted = in_use_.find(key);
  if (counted == in_use_.end()) return false;
  count(counted->second, -1, /*queued=*/false);
  in_use_.erase(counted);
  return true;
}

void RoutingCounts::queued(const std::string& namespace_name, const std::string& queue,
                           int64_t sign) {
  count({namespace_name, queue, {}}, sign, /*queued=*/true);
}

std::map<std::string, int64_t> RoutingCounts::queues_of(const std::string& namespace_name) const {
  std::map<std::string, int64_t> out;
  for (auto it = by_queue_.lower_bound({namespace_name, ""});
       it != by_queue_.end() && it->first.first == namespace_name; ++it) {
    out[it->first.second] = it->second;
  }
  return out;
}

int64_t RoutingCounts::in_queue(const std::string& namespace_name, const std::string& queue) const {
  auto it = by_queue_.find({namespace_name, queue});
  return it == by_queue_.end() ? 0 : it->second;
}

std::map<RoutingCounts::Key, int64_t> RoutingCounts::queue_depths() const {
  std::map<Key, int64_t> out;
  for (const auto& [key, queued] : queued_by_queue_) {
    if (queued != 0) out[key] = queued;
  }
  return out;
}

std::string RoutingCounts::broken_invariant() const {
  model::UsageCounts sum;
  for (const auto& [ns, counts] : by_namespace_) {
    if (counts.workloads < 0 || counts.queued < 0 || counts.cpu_milli < 0 || counts.memory_bytes < 0) {
      return "a namespace's routing count is below zero";
    }
    int64_t in_queues = 0;
    for (const auto& [queue, workloads] : queues_of(ns)) in_queues += workloads;
    if (in_queues != counts.workloads + counts.queued) {
      return "a namespace's queues do not hold its workloads and queued candidates";
    }
    sum += counts;
  }
  if (!(sum == cluster_)) return "the cluster-wide routing counts are not the namespaces' sum";
  size_t counted = 0;
  for (const auto& [ns, counts] : by_namespace_) counted += static_cast<size_t>(counts.workloads);
  if (counted != in_use_.size()) return "the routing counts differ from what is counted as in use";
  return "";
}

}  // namespace shoal::core::target
