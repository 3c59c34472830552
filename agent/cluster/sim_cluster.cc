#include "agent/cluster/sim_cluster.h"

#include <algorithm>

namespace shoal::cluster {

Result<std::unique_ptr<SimCluster>> SimCluster::create(model::ClusterSpec spec) {
  SHOAL_ASSIGN_OR_RETURN(FairShareScheduler scheduler, FairShareScheduler::create(spec));
  return std::unique_ptr<SimCluster>(new SimCluster(std::move(spec), std::move(scheduler)));
}

SimCluster::SimCluster(model::ClusterSpec spec, FairShareScheduler scheduler)
    : spec_(std::move(spec)), scheduler_(scheduler), idle_scheduler_(std::move(scheduler)) {
  for (const auto& node : spec_.nodes) usage_.push_back({node.name, node.capacity, {}, {}});
}

void SimCluster::allocate(size_t node, const model::Resources& amount) {
  usage_[node].allocated += amount;
  usage_[node].peak_allocated =
      model::Resources::max(usage_[node].peak_allocated, usage_[node].allocated);
}

Result<std::vector<std::string>> SimCluster::reserve(const std::string& key,
                                                     const model::WorkloadSpec& spec) {
  if (holdings_.count(key)) return Status(ErrorCode::kAlreadyExists, "already reserved: " + key);
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> nodes, scheduler_.admit(key, spec));
  hold(key, spec, nodes);
  return nodes;
}

bool SimCluster::enqueue(const std::string& key, const model::WorkloadSpec& spec) {
  if (holdings_.count(key)) return false;
  return queue_.push(key, spec);
}

void SimCluster::withdraw(const std::string& key) { queue_.erase(key); }

std::vector<Cluster::Reserved> SimCluster::serve_queue() {
  std::vector<Reserved> reserved;
  if (queue_.empty()) return reserved;
  std::vector<FairShareScheduler::Served> served = scheduler_.serve(queue_, /*whole=*/true);
  reserved.reserve(served.size());
  for (FairShareScheduler::Served& one : served) {
    hold(one.key, one.spec, one.nodes);
    reserved.push_back({std::move(one.key), std::move(one.nodes)});
  }
  return reserved;
}

std::string SimCluster::queued_reason(const std::string& key) const {
  return std::string(queue_.reason(key));
}

Status SimCluster::fits_when_idle(const model::WorkloadSpec& spec) const {
  FairShareScheduler idle = idle_scheduler_;
  return idle.admit("idle-check", spec).status();
}

Status SimCluster::restore(const std::string& key, const model::WorkloadSpec& spec,
                           const std::vector<std::string>& nodes) {
  if (holdings_.count(key)) return Status(ErrorCode::kAlreadyExists, "already reserved: " + key);
  SHOAL_RETURN_IF_ERROR(scheduler_.restore(spec, nodes));
  hold(key, spec, nodes);
  return Status::ok();
}

void SimCluster::hold(const std::string& key, const model::WorkloadSpec& spec,
                      const std::vector<std::string>& nodes) {
  // The scheduler chose (or re-checked) `nodes`; mirror them for usage and peaks.
  Holding holding{spec, spec.resources, {}, false, false, {}, 0};
  for (const auto& name : nodes) {
    auto it = std::find_if(usage_.begin(), usage_.end(), [&](const NodeUsage& n) { return n.name == name; });
    size_t index = static_cast<size_t>(it - usage_.begin());
    allocate(index, spec.resources);
    holding.node_indexes.push_back(index);
  }
  holdings_.emplace(key, std::move(holding));
}

void SimCluster::release(const std::string& key) {
  auto it = holdings_.find(key);
  if (it == holdings_.end()) return;
  std::vector<std::string> names;
  for (size_t index : it->second.node_indexes) {
    usage_[index].allocated -= it->second.per_replica;
    names.push_back(usage_[index].name);
  }
  scheduler_.release(it->second.spec, names);
  holdings_.erase(it);
}

Status SimCluster::start(const std::string& key, TimePoint started_at, Duration duration,
                         int32_t exit_code) {
  auto it = holdings_.find(key);
  if (it == holdings_.end()) return not_found("no reservation for " + key);
  Holding& holding = it->second;
  if (holding.started) return Status::ok();
  holding.started = true;
  holding.finish_at = started_at + duration;
  holding.exit_code = exit_code;
  return Status::ok();
}

std::vector<WorkloadEvent> SimCluster::drain_events(TimePoint now) {
  std::vector<WorkloadEvent> events;
  std::vector<std::string> finished;
  for (auto& [key, holding] : holdings_) {
    if (!holding.started) continue;
    if (!holding.start_reported) {
      holding.start_reported = true;
      events.push_back({key, WorkloadEventKind::kStarted, now, 0, ""});
    }
    if (holding.finish_at <= now) {
      bool ok = holding.exit_code == 0;
      events.push_back({key, ok ? WorkloadEventKind::kSucceeded : WorkloadEventKind::kFailed,
                        holding.finish_at, holding.exit_code,
                        ok ? "" : "exited with code " + std::to_string(holding.exit_code)});
      finished.push_back(key);
    }
  }
  for (const auto& key : finished) release(key);
  return events;
}

TimePoint SimCluster::next_event_at() const {
  TimePoint next = TimePoint::max();
  for (const auto& [key, holding] : holdings_) {
    if (!holding.started) continue;
    if (!holding.start_reported) return TimePoint::min();
    next = std::min(next, holding.finish_at);
  }
  return next;
}

CapacitySummary SimCluster::capacity() const {
  CapacitySummary summary;
  for (const auto& node : usage_) {
    model::Resources free = node.capacity - node.allocated;
    summary.free += free;
    summary.largest_free_node = model::Resources::max(summary.largest_free_node, free);
  }
  return summary;
}

CapacitySummary SimCluster::capacity_for(const std::string& namespace_name) const {
  CapacitySummary summary = capacity();
  model::Resources headroom = scheduler_.quota_headroom(namespace_name);
  auto cap = [&](model::Resources r) {
    return model::Resources{std::min(r.cpu_milli, headroom.cpu_milli),
                            std::min(r.memory_bytes, headroom.memory_bytes), std::min(r.gpu, headroom.gpu)};
  };
  return {cap(summary.free), cap(summary.largest_free_node)};
}

std::optional<CapacitySummary> SimCluster::capacity_for(const std::string& namespace_name,
                                                        const std::string& queue) const {
  std::optional<model::Resources> headroom = scheduler_.queue_headroom(queue);
  if (!headroom) return std::nullopt;
  CapacitySummary summary = capacity_for(namespace_name);
  auto cap = [&](model::Resources r) {
    return model::Resources{std::min(r.cpu_milli, headroom->cpu_milli),
                            std::min(r.memory_bytes, headroom->memory_bytes), std::min(r.gpu, headroom->gpu)};
  };
  return CapacitySummary{cap(summary.free), cap(summary.largest_free_node)};
}

std::vector<std::string> SimCluster::queue_names() const {
  std::vector<std::string> names;
  for (const auto& queue : spec_.queues) names.push_back(queue.name);
  return names;
}

std::vector<NodeUsage> SimCluster::nodes() const { return usage_; }

bool SimCluster::check_invariants() const {
  std::vector<model::Resources> expected(usage_.size());
  for (const auto& [key, holding] : holdings_) {
    for (size_t index : holding.node_indexes) expected[index] += holding.per_replica;
    if (queue_.contains(key)) return false;  // reserved work has left the queue
  }
  if (!queue_.check_invariants()) return false;
  for (size_t i = 0; i < usage_.size(); ++i) {
    if (!(expected[i] == usage_[i].allocated)) return false;
    if (!(scheduler_.node_allocated()[i] == usage_[i].allocated)) return false;
    if (!usage_[i].capacity.fits(usage_[i].allocated)) return false;
    if (!usage_[i].capacity.fits(usage_[i].peak_allocated)) return false;
  }
  return true;
}

}  // namespace shoal::cluster
