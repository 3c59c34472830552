#include "agent/cluster/node_cluster.h"

#include <algorithm>

#include "common/check.h"

namespace shoal::cluster {

Status SimRunner::launch(const LaunchRequest& request) {
  TimePoint finish_at = request.started_at + request.spec.sim.duration;
  auto [run, launched] = runs_.try_emplace(request.key, Run{finish_at, request.spec.sim.exit_code});
  if (!launched) return Status::ok();  // re-attached: it runs on
  by_finish_.emplace(finish_at, request.key);
  return Status::ok();
}

bool SimRunner::stop(const std::string& key, Duration) {
  if (auto run = runs_.find(key); run != runs_.end()) {
    by_finish_.erase({run->second.finish_at, key});
    runs_.erase(run);
  }
  return true;
}

std::vector<WorkloadEvent> SimRunner::observe(TimePoint now) {
  // The runs that are over, reported in key order.
  std::vector<std::string> over;
  while (!by_finish_.empty() && by_finish_.begin()->first <= now) {
    over.push_back(std::move(by_finish_.begin()->second));
    by_finish_.erase(by_finish_.begin());
  }
  std::sort(over.begin(), over.end());
  std::vector<WorkloadEvent> events;
  for (const std::string& key : over) {
    auto it = runs_.find(key);
    const Run& run = it->second;
    bool ok = run.exit_code == 0;
    events.push_back({key, ok ? WorkloadEventKind::kSucceeded : WorkloadEventKind::kFailed,
                      run.finish_at, run.exit_code,
                      ok ? "" : "exited with code " + std::to_string(run.exit_code)});
    runs_.erase(it);
  }
  return events;
}

TimePoint SimRunner::next_event_at() const {
  return by_finish_.empty() ? TimePoint::max() : by_finish_.begin()->first;
}

Result<std::unique_ptr<NodeCluster>> NodeCluster::create(model::ClusterSpec spec,
                                                         std::unique_ptr<Runner> runner) {
  SHOAL_ASSIGN_OR_RETURN(FairShareScheduler scheduler, FairShareScheduler::create(spec));
  return std::unique_ptr<NodeCluster>(
      new NodeCluster(std::move(spec), std::move(scheduler), std::move(runner)));
}

Result<std::unique_ptr<NodeCluster>> make_sim_cluster(model::ClusterSpec spec) {
  return NodeCluster::create(std::move(spec), std::make_unique<SimRunner>());
}

NodeCluster::NodeCluster(model::ClusterSpec spec, FairShareScheduler scheduler,
                         std::unique_ptr<Runner> runner)
    : spec_(std::move(spec)),
      scheduler_(scheduler),
      idle_scheduler_(std::move(scheduler)),
      runner_(std::move(runner)) {
  for (const auto& node : spec_.nodes) usage_.push_back({node.name, node.capacity, {}, {}, {}});
  withheld_.resize(usage_.size());
  for (const auto& queue : spec_.queues) queue_names_.push_back(queue.name);
}

void NodeCluster::allocate(size_t node, const model::Resources& amount) {
  usage_[node].allocated += amount;
  usage_[node].peak_allocated =
      model::Resources::max(usage_[node].peak_allocated, usage_[node].allocated);
}

Result<std::vector<std::string>> NodeCluster::reserve(const std::string& key,
                                                     const model::WorkloadSpec& spec) {
  if (holdings_.count(key)) return Status(ErrorCode::kAlreadyExists, "already reserved: " + key);
  if (Status health = runner_->health(); !health.is_ok()) {
    return Status(ErrorCode::kUnavailable, "BackendUnavailable: " + health.message());
  }
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> nodes, scheduler_.admit(key, spec));
  hold(key, spec, nodes);
  return nodes;
}

bool NodeCluster::enqueue(const std::string& key, const model::WorkloadSpec& spec) {
  if (holdings_.count(key)) return false;
  return queue_.push(key, spec);
}

void NodeCluster::withdraw(const std::string& key) { queue_.erase(key); }

void NodeCluster::set_priority(const std::string& key, int32_t priority) {
  if (auto held = holdings_.find(key); held != holdings_.end()) held->second.spec.priority = priority;
}

std::vector<Cluster::Reserved> NodeCluster::serve_queue() {
  std::vector<Reserved> reserved;
  // Nothing is reserved on a backend that cannot run it now: the queue waits.
  if (queue_.empty() || !runner_->health().is_ok()) return reserved;
  std::vector<FairShareScheduler::Served> served = scheduler_.serve(queue_, /*whole=*/true);
  reserved.reserve(served.size());
  for (FairShareScheduler::Served& one : served) {
    hold(one.key, one.spec, one.nodes);
    reserved.push_back({std::move(one.key), std::move(one.nodes)});
  }
  return reserved;
}

std::string NodeCluster::queued_reason(const std::string& key) const {
  return std::string(queue_.reason(key));
}

Status NodeCluster::fits_when_idle(const model::WorkloadSpec& spec) const {
  SHOAL_RETURN_IF_ERROR(runner_->supports(spec));
  // Placed on the idle scheduler and taken off again: it holds nothing
  // before and after, and no copy of the whole cluster (a thousand nodes
  // with their labels) is made for every candidate.
  SHOAL_ASSIGN_OR_RETURN(std::vector<std::string> nodes, idle_scheduler_.admit("idle-check", spec));
  idle_scheduler_.release(spec, nodes);
  return Status::ok();
}

Status NodeCluster::restore(const std::string& key, const model::WorkloadSpec& spec,
                           const std::vector<std::string>& nodes, Restored restored) {
  if (holdings_.count(key)) return Status(ErrorCode::kAlreadyExists, "already reserved: " + key);
  if (restored == Restored::kLaunched) grow_to_hold(spec, nodes);
  SHOAL_RETURN_IF_ERROR(scheduler_.restore(spec, nodes));
  hold(key, spec, nodes);
  return Status::ok();
}

Status NodeCluster::restore_preempted(const std::string& key, const model::WorkloadSpec& spec,
                                      const std::vector<std::string>& nodes, TimePoint now) {
  // A victim still stopping may still run: it is held as launched work is.
  SHOAL_RETURN_IF_ERROR(restore(key, spec, nodes, Restored::kLaunched));
  auto it = holdings_.find(key);
  Holding holding = std::move(it->second);
  holdings_.erase(it);
  // The runner finds what still runs of it (an exec process in its grace
  // period) and stops it again.
  if (runner_->stop(key, spec.termination_grace)) {
    free_room(holding);
    preempted_.push_back(preempted_event(key, now));
    return Status::ok();
  }
  holding.reports_preempted = true;
  stopping_[key].push_back(std::move(holding));
  return Status::ok();
}

void NodeCluster::hold(const std::string& key, const model::WorkloadSpec& spec,
                      const std::vector<std::string>& nodes) {
  // The scheduler chose (or re-checked) `nodes`; mirror them for usage and peaks.
  ++capacity_version_;
  Holding holding;
  holding.spec = spec;
  holding.held_seq = ++held_seq_;
  for (const auto& name : nodes) {
    auto it = std::find_if(usage_.begin(), usage_.end(), [&](const NodeUsage& n) { return n.name == name; });
    size_t index = static_cast<size_t>(it - usage_.begin());
    allocate(index, spec.resources);
    holding.node_indexes.push_back(index);
  }
  holdings_.emplace(key, std::move(holding));
}

void NodeCluster::free_room(const Holding& holding) {
  ++capacity_version_;
  std::vector<std::string> names;
  for (size_t index : holding.node_indexes) {
    usage_[index].allocated -= holding.spec.resources;
    names.push_back(usage_[index].name);
  }
  scheduler_.release(holding.spec, names);
}

void NodeCluster::release(const std::string& key) {
  auto it = holdings_.find(key);
  if (it == holdings_.end()) return;
  stop(key, it->second.spec.termination_grace);
}

void NodeCluster::stop(const std::string& key, Duration grace) {
  auto it = holdings_.find(key);
  if (it == holdings_.end()) return;
  Holding holding = std::move(it->second);
  holdings_.erase(it);
  unreported_starts_.erase(key);
  if (!holding.waits_for.empty()) {
    // Never launched: its victims still stop, and the room it took stays
    // held until they are gone.
    holding.deferred.reset();
    orphans_.emplace_back(key, std::move(holding));
    return;
  }
  // Also when this agent never launched it: a copy restored after a
  // restart may still run from before, and its room is free only once that
  // is gone.
  if (!runner_->stop(key, grace)) {
    stopping_[key].push_back(std::move(holding));
    return;
  }
  free_room(holding);
}

Status NodeCluster::launch(const LaunchRequest& request) {
  auto it = holdings_.find(request.key);
  if (it == holdings_.end()) return not_found("no reservation for " + request.key);
  SHOAL_RETURN_IF_ERROR(runner_->supports(request.spec));
  if (!it->second.waits_for.empty()) {
    // A preemptor: it starts once the work it displaced is gone.
    it->second.launched = true;
    it->second.deferred = request;
    return Status::ok();
  }
  SHOAL_RETURN_IF_ERROR(runner_->launch(request));
  it->second.launched = true;
  if (!runner_->reports_starts()) unreported_starts_.insert(request.key);
  return Status::ok();
}

std::vector<WorkloadEvent> NodeCluster::observe(TimePoint now) {
  // Every launch is reported Started once, before how it ended (a re-attach
  // after a restart again: the core takes the first); here at launch,
  // unless the runner reports starts itself.
  std::vector<WorkloadEvent> events = std::move(preempted_);
  preempted_.clear();
  for (const std::string& key : unreported_starts_) {
    events.push_back({key, WorkloadEventKind::kStarted, now, 0, runner_->describe(key)});
  }
  unreported_starts_.clear();
  std::vector<WorkloadEvent> observed = runner_->observe(now);
  events.insert(events.end(), std::make_move_iterator(observed.begin()),
                std::make_move_iterator(observed.end()));
  bool grew = take_nodes(runner_->take_node_changes());
  if (refresh_room_taken() || grew) {
    events.push_back({"", WorkloadEventKind::kStopped, now, 0, "room freed by work not ours"});
  }
  std::vector<WorkloadEvent> followers;  // what victims' ends set off
  for (const WorkloadEvent& event : events) {
    if (event.kind == WorkloadEventKind::kStopped) {
      auto it = stopping_.find(event.key);
      if (it == stopping_.end()) continue;
      Holding gone = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) stopping_.erase(it);
      if (gone.preempted_for.empty()) {
        free_room(gone);
        if (gone.reports_preempted) followers.push_back(preempted_event(event.key, event.at));
      } else {
        followers.push_back(preempted_event(event.key, event.at));
        victim_gone(event.key, gone.preempted_for, now, &followers);
      }
    } else if (event.kind != WorkloadEventKind::kStarted && event.kind != WorkloadEventKind::kWaiting) {
      // Work that ended on its own frees its room at once; the core's later
      // release() of the finished key is a no-op.
      auto it = holdings_.find(event.key);
      if (it == holdings_.end()) continue;
      free_room(it->second);
      holdings_.erase(it);
    }
  }
  events.insert(events.end(), std::make_move_iterator(followers.begin()),
                std::make_move_iterator(followers.end()));
  return events;
}

bool NodeCluster::take_nodes(const std::vector<model::NodeSpec>& nodes) {
  bool grew = false;
  for (const model::NodeSpec& node : nodes) {
    auto known = std::find_if(spec_.nodes.begin(), spec_.nodes.end(),
                              [&](const model::NodeSpec& have) { return have.name == node.name; });
    model::NodeSpec taken = node;
    if (known == spec_.nodes.end()) {
      spec_.nodes.push_back(node);
      usage_.push_back({node.name, node.capacity, {}, {}, {}});
      withheld_.emplace_back();
      grew = true;
    } else {
      auto i = static_cast<size_t>(known - spec_.nodes.begin());
      taken.capacity = model::Resources::max(known->capacity, node.capacity);
      grew = grew || !known->capacity.fits(taken.capacity);  // less withheld: refresh_room_taken
      withheld_[i] = taken.capacity - node.capacity;
      *known = taken;
      usage_[i].capacity = taken.capacity;
    }
    scheduler_.put_node(taken);
    idle_scheduler_.put_node(taken);
  }
  if (!nodes.empty()) ++capacity_version_;
  return grew;
}

void NodeCluster::grow_to_hold(const model::WorkloadSpec& spec,
                               const std::vector<std::string>& nodes) {
  std::map<size_t, model::Resources> needed;  // node index -> what it holds with `spec` too
  for (const std::string& name : nodes) {
    auto it = std::find_if(usage_.begin(), usage_.end(), [&](const NodeUsage& n) { return n.name == name; });
    if (it == usage_.end()) continue;  // gone: restore refuses it
    auto index = static_cast<size_t>(it - usage_.begin());
    needed.try_emplace(index, usage_[index].allocated).first->second += spec.resources;
  }
  // A node where a restored victim still stops is not grown: launched work
  // that no longer fits beside the victim is its preemptor, whose launch
  // waited for the victim's end and must not start beside it.
  std::set<size_t> victims_stop;
  for (const auto& [key, holdings] : stopping_) {
    for (const Holding& holding : holdings) {
      if (!holding.reports_preempted) continue;
      victims_stop.insert(holding.node_indexes.begin(), holding.node_indexes.end());
    }
  }
  bool grew = false;
  for (const auto& [index, holds] : needed) {
    model::NodeSpec& node = spec_.nodes[index];
    if (node.capacity.fits(holds) || victims_stop.count(index)) continue;
    model::Resources grown = model::Resources::max(node.capacity, holds);
    withheld_[index] += grown - node.capacity;
    node.capacity = grown;
    usage_[index].capacity = grown;
    scheduler_.put_node(node);
    idle_scheduler_.put_node(node);
    grew = true;
  }
  if (grew) {
    ++capacity_version_;
    refresh_room_taken();
  }
}

bool NodeCluster::refresh_room_taken() {
  std::map<std::string, model::Resources> taken = runner_->room_taken_by_others();
  bool changed = false, freed = false;
  std::vector<model::Resources> by_index(usage_.size());
  for (size_t i = 0; i < usage_.size(); ++i) {
    auto it = taken.find(usage_[i].name);
    by_index[i] = withheld_[i] + (it == taken.end() ? model::Resources{} : it->second);
    const model::Resources& before = usage_[i].taken_by_others;
    if (by_index[i] == before) continue;
    changed = true;
    freed = freed || !by_index[i].fits(before);
    usage_[i].taken_by_others = by_index[i];
  }
  if (changed) {
    ++capacity_version_;
    scheduler_.set_room_taken(std::move(by_index));
  }
  return freed;
}

TimePoint NodeCluster::next_event_at() const {
  return unreported_starts_.empty() && preempted_.empty() ? runner_->next_event_at()
                                                          : TimePoint::min();
}

CapacitySummary NodeCluster::capacity() const {
  CapacitySummary summary;
  for (const auto& node : usage_) {
    model::Resources free =
        model::Resources::max(node.capacity - node.allocated - node.taken_by_others, {});
    summary.free += free;
    summary.largest_free_node = model::Resources::max(summary.largest_free_node, free);
  }
  return summary;
}

CapacitySummary NodeCluster::capacity_for(const std::string& namespace_name) const {
  CapacitySummary summary = capacity();
  model::Resources headroom = scheduler_.quota_headroom(namespace_name);
  auto cap = [&](model::Resources r) {
    return model::Resources{std::min(r.cpu_milli, headroom.cpu_milli),
                            std::min(r.memory_bytes, headroom.memory_bytes), std::min(r.gpu, headroom.gpu)};
  };
  return {cap(summary.free), cap(summary.largest_free_node)};
}

std::optional<CapacitySummary> NodeCluster::capacity_for(const std::string& namespace_name,
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

std::vector<RunningWork> NodeCluster::running_work() const {
  std::vector<RunningWork> running;
  for (const auto& [key, holding] : holdings_) {
    if (!holding.launched || !holding.waits_for.empty()) continue;
    std::vector<std::string> names;
    for (size_t index : holding.node_indexes) names.push_back(usage_[index].name);
    running.push_back({key, &holding.spec, std::move(names), holding.held_seq});
  }
  return running;
}

std::optional<PreemptionCost> NodeCluster::preemption_cost(
    const model::WorkloadSpec& spec, const std::function<bool(const std::string&)>& may_stop) const {
  if (!spec_.preemption.enabled() || !runner_->health().is_ok()) return std::nullopt;
  std::vector<RunningWork> running = running_work();
  std::optional<PreemptionPlan> plan = scheduler_.plan_preemption(
      spec, running, [&](const RunningWork& work) { return may_stop(work.key); });
  if (!plan) return std::nullopt;
  return PreemptionCost{static_cast<int32_t>(plan->victims.size()), plan->highest_priority};
}

Result<Preemption> NodeCluster::preempt(const std::string& key, const model::WorkloadSpec& spec,
                                        const std::function<bool(const std::string&)>& may_stop,
                                        TimePoint now) {
  if (holdings_.count(key)) return Status(ErrorCode::kAlreadyExists, "already reserved: " + key);
  if (Status health = runner_->health(); !health.is_ok()) {
    return Status(ErrorCode::kUnavailable, "BackendUnavailable: " + health.message());
  }
  std::optional<PreemptionPlan> plan;
  {
    std::vector<RunningWork> running = running_work();
    plan = scheduler_.plan_preemption(spec, running,
                                      [&](const RunningWork& work) { return may_stop(work.key); });
  }
  if (!plan) return Status(ErrorCode::kUnavailable, "NoPreemptionMakesRoom");
  std::set<std::string> still_stopping;
  for (const std::string& victim : plan->victims) {
    auto it = holdings_.find(victim);
    Holding holding = std::move(it->second);
    holdings_.erase(it);
    unreported_starts_.erase(victim);
    free_room(holding);  // passes to `key` below, in this same call
    if (runner_->stop(victim, holding.spec.termination_grace)) {
      preempted_.push_back(preempted_event(victim, now));
      continue;
    }
    holding.preempted_for = key;
    stopping_[victim].push_back(std::move(holding));
    still_stopping.insert(victim);
  }
  Status restored = scheduler_.restore(spec, plan->nodes);
  SHOAL_CHECK(restored.is_ok(), "a preemption plan's nodes did not fit once its victims were gone");
  hold(key, spec, plan->nodes);
  holdings_.at(key).waits_for = std::move(still_stopping);
  return Preemption{std::move(plan->nodes), std::move(plan->victims)};
}

WorkloadEvent NodeCluster::preempted_event(const std::string& victim, TimePoint at) {
  return WorkloadEvent{victim, WorkloadEventKind::kFailed, at, -1,
                       "stopped to make room for work of higher priority", EndCause::kPreempted};
}

void NodeCluster::victim_gone(const std::string& victim, const std::string& preemptor, TimePoint now,
                              std::vector<WorkloadEvent>* events) {
  if (auto it = holdings_.find(preemptor); it != holdings_.end() && it->second.waits_for.erase(victim)) {
    Holding& holding = it->second;
    if (!holding.waits_for.empty() || !holding.deferred) return;
    LaunchRequest request = std::move(*holding.deferred);
    holding.deferred.reset();
    if (Status launched = runner_->launch(request); !launched.is_ok()) {
      events->push_back({preemptor, WorkloadEventKind::kFailed, now, -1,
                         "StartFailed: " + launched.message(), EndCause::kEvicted});
      return;
    }
    if (!runner_->reports_starts()) {
      events->push_back({preemptor, WorkloadEventKind::kStarted, now, 0, runner_->describe(preemptor)});
    }
    return;
  }
  for (auto it = orphans_.begin(); it != orphans_.end(); ++it) {
    if (it->first != preemptor || !it->second.waits_for.erase(victim)) continue;
    if (it->second.waits_for.empty()) {
      free_room(it->second);
      orphans_.erase(it);
      events->push_back({"", WorkloadEventKind::kStopped, now, 0, "room freed by a preemption given up"});
    }
    return;
  }
}

bool NodeCluster::check_invariants() const {
  std::vector<model::Resources> expected(usage_.size());
  for (const auto& [key, holding] : holdings_) {
    for (size_t index : holding.node_indexes) expected[index] += holding.spec.resources;
    if (queue_.contains(key)) return false;  // reserved work has left the queue
  }
  std::map<std::string, size_t> waited;  // victim -> preemptors (and orphans) waiting for it
  auto count_waits = [&](const Holding& holding) {
    for (const std::string& victim : holding.waits_for) waited[victim] += 1;
  };
  for (const auto& [key, holding] : holdings_) count_waits(holding);
  for (const auto& [key, holding] : orphans_) {
    for (size_t index : holding.node_indexes) expected[index] += holding.spec.resources;
    if (holding.waits_for.empty()) return false;  // freed when its last victim went
    count_waits(holding);
  }
  for (const auto& [key, holdings] : stopping_) {
    for (const Holding& holding : holdings) {
      // A victim's room is counted once: in the holding that took it.
      if (!holding.preempted_for.empty()) {
        if (waited[key] == 0) return false;
        waited[key] -= 1;
        continue;
      }
      for (size_t index : holding.node_indexes) expected[index] += holding.spec.resources;
    }
  }
  for (const auto& [victim, count] : waited) {
    if (count != 0) return false;  // waits for a victim that is not stopping
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
