// The local scheduler's pass as it was before ScheduleQueue: every pending
// workload tried one by one, in fair-share order. Kept only as the oracle
// that FairShareScheduler's grouped pass must agree with, decision for
// decision (fair_share_test.cc); quotas on cpu and count/workloads only.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "agent/cluster/fair_share.h"

namespace shoal::cluster::reference {

using model::Resources;

inline bool node_matches(const model::NodeSpec& node, const model::Labels& selector) {
  for (const auto& [key, value] : selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  return true;
}

inline double allocation_fraction(const Resources& allocated, const Resources& capacity) {
  double sum = 0;
  int count = 0;
  auto add = [&](int64_t used, int64_t total) {
    if (total <= 0) return;
    sum += static_cast<double>(used) / static_cast<double>(total);
    ++count;
  };
  add(allocated.cpu_milli, capacity.cpu_milli);
  add(allocated.memory_bytes, capacity.memory_bytes);
  add(allocated.gpu, capacity.gpu);
  return count ? sum / count : 0;
}

inline Resources share_of(const Resources& capacity, int64_t weight, int64_t total_weight) {
  return {capacity.cpu_milli * weight / total_weight, capacity.memory_bytes * weight / total_weight,
          capacity.gpu * weight / total_weight};
}

class ReferenceScheduler {
 public:
  ReferenceScheduler(model::ClusterSpec spec, std::map<std::string, NamespaceQuota> quotas,
                     std::map<std::string, int64_t> weights)
      : spec_(std::move(spec)), quotas_(std::move(quotas)), namespace_weights_(std::move(weights)) {
    for (const auto& node : spec_.nodes) capacity_ += node.capacity;
    allocated_.assign(spec_.nodes.size(), Resources{});
  }
  ScheduleResult allocate(const std::vector<ScheduleRequest>& pending);
  void release(const model::WorkloadSpec& spec, const std::vector<size_t>& nodes) {
    for (size_t n : nodes) allocated_[n] -= spec.resources;
    Resources amount = spec.resources * static_cast<int64_t>(nodes.size());
    namespace_used_[spec.namespace_name] -= spec.total();
    namespace_workloads_[spec.namespace_name] -= 1;
    queue_allocated_[spec.queue] -= amount;
    queue_namespace_allocated_[{spec.queue, spec.namespace_name}] -= amount;
  }
  const std::vector<Resources>& node_allocated() const { return allocated_; }

 private:
  int64_t namespace_weight(const std::string& name) const {
    auto it = namespace_weights_.find(name);
    return it == namespace_weights_.end() || it->second < 1 ? 1 : it->second;
  }

  model::ClusterSpec spec_;
  std::map<std::string, NamespaceQuota> quotas_;
  std::map<std::string, int64_t> namespace_weights_;
  Resources capacity_;
  std::vector<Resources> allocated_;
  std::map<std::string, Resources> namespace_used_;
  std::map<std::string, int64_t> namespace_workloads_;
  std::map<std::string, Resources> queue_allocated_;
  std::map<std::pair<std::string, std::string>, Resources> queue_namespace_allocated_;
};

inline ScheduleResult ReferenceScheduler::allocate(const std::vector<ScheduleRequest>& pending) {
  ScheduleResult result;
  result.workloads.resize(pending.size());
  int64_t total_weight = 0;
  std::map<std::string, size_t> queue_index;
  for (const auto& queue : spec_.queues) {
    queue_index[queue.name] = queue_index.size();
    total_weight += queue.weight;
  }

  // Nodes ordered by allocation: LeastAllocated takes from the front,
  // MostAllocated from the back. Re-keyed after every placement.
  std::set<std::pair<double, size_t>> node_order;
  std::vector<double> node_key(spec_.nodes.size());
  for (size_t n = 0; n < spec_.nodes.size(); ++n) {
    node_key[n] = allocation_fraction(allocated_[n], spec_.nodes[n].capacity);
    node_order.insert({node_key[n], n});
  }
  auto place_task = [&](const model::WorkloadSpec& spec, std::vector<size_t>* chosen) -> bool {
    auto fits = [&](size_t n) {
      return (spec_.nodes[n].capacity - allocated_[n]).fits(spec.resources) &&
             node_matches(spec_.nodes[n], spec.node_selector);
    };
    std::optional<size_t> pick;
    if (spec_.node_order == model::NodeOrder::kLeastAllocated) {
      for (auto it = node_order.begin(); it != node_order.end() && !pick; ++it) if (fits(it->second)) pick = it->second;
    } else {
      for (auto it = node_order.rbegin(); it != node_order.rend() && !pick; ++it) if (fits(it->second)) pick = it->second;
    }
    if (!pick) return false;
    node_order.erase({node_key[*pick], *pick});
    allocated_[*pick] += spec.resources;
    node_key[*pick] = allocation_fraction(allocated_[*pick], spec_.nodes[*pick].capacity);
    node_order.insert({node_key[*pick], *pick});
    chosen->push_back(*pick);
    return true;
  };
  auto unplace = [&](const model::WorkloadSpec& spec, const std::vector<size_t>& nodes) {
    for (size_t n : nodes) {
      node_order.erase({node_key[n], n});
      allocated_[n] -= spec.resources;
      node_key[n] = allocation_fraction(allocated_[n], spec_.nodes[n].capacity);
      node_order.insert({node_key[n], n});
    }
  };

  // Per queue: namespaces (min-heap by weighted dominant share, then name),
  // each with its workloads by priority (highest first), then request order.
  struct NamespaceWork {
    std::string name;
    std::vector<size_t> workloads;
    size_t next = 0;
  };
  struct QueueWork {
    std::vector<NamespaceWork> namespaces;
    std::map<std::string, size_t> by_name;
    Resources deserved;
  };
  std::vector<QueueWork> queues(spec_.queues.size());
  for (size_t q = 0; q < queues.size(); ++q) {
    queues[q].deserved = share_of(capacity_, spec_.queues[q].weight, total_weight);
  }
  std::vector<int32_t> placed_tasks(pending.size(), 0);
  for (size_t i = 0; i < pending.size(); ++i) {
    const auto& spec = pending[i].spec;
    result.workloads[i].key = pending[i].key;
    auto q = queue_index.find(spec.queue);
    if (q == queue_index.end()) {
      result.workloads[i].reason = "NoSuchQueue:" + spec.queue;
      continue;
    }
    QueueWork& queue = queues[q->second];
    auto [it, fresh] = queue.by_name.emplace(spec.namespace_name, queue.namespaces.size());
    if (fresh) queue.namespaces.push_back({spec.namespace_name, {}, 0});
    queue.namespaces[it->second].workloads.push_back(i);
  }
  for (auto& queue : queues) {
    for (auto& ns : queue.namespaces) {
      std::stable_sort(ns.workloads.begin(), ns.workloads.end(), [&](size_t a, size_t b) {
        return pending[a].spec.priority > pending[b].spec.priority;
      });
    }
  }

  auto run_pass = [&](bool capped) {
    using Entry = std::tuple<double, std::string, size_t>;  // (weighted share, name, namespace index)
    std::vector<std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>>> heaps(queues.size());
    auto ns_share = [&](size_t q, const NamespaceWork& ns) {
      auto it = queue_namespace_allocated_.find({spec_.queues[q].name, ns.name});
      Resources used = it == queue_namespace_allocated_.end() ? Resources{} : it->second;
      return dominant_share(used, capacity_) / static_cast<double>(namespace_weight(ns.name));
    };
    for (size_t q = 0; q < queues.size(); ++q) {
      for (size_t n = 0; n < queues[q].namespaces.size(); ++n) {
        const auto& ns = queues[q].namespaces[n];
        if (ns.next < ns.workloads.size()) heaps[q].push({ns_share(q, ns), ns.name, n});
      }
    }
    while (true) {
      // The queue furthest below its weight goes next.
      std::optional<size_t> best_queue;
      double best_share = 0;
      for (size_t q = 0; q < queues.size(); ++q) {
        if (heaps[q].empty()) continue;
        double share = dominant_share(queue_allocated_[spec_.queues[q].name], capacity_) /
                       static_cast<double>(spec_.queues[q].weight);
        if (!best_queue || share < best_share) {
          best_queue = q;
          best_share = share;
        }
      }
      if (!best_queue) return;
      size_t q = *best_queue;
      const std::string& queue_name = spec_.queues[q].name;
      auto [share, ns_name, n] = heaps[q].top();
      heaps[q].pop();
      NamespaceWork& ns = queues[q].namespaces[n];
      size_t w = ns.workloads[ns.next];
      const model::WorkloadSpec& spec = pending[w].spec;
      WorkloadDecision& decision = result.workloads[w];
      bool first = placed_tasks[w] == 0;
      int32_t tasks = first ? spec.gang_size() : 1;
      Resources amount = spec.resources * tasks;
      std::string refusal;
      if (capped && !queues[q].deserved.fits(queue_allocated_[queue_name] + amount)) {
        refusal = "QueueDeservedShareReached:" + queue_name;
      } else if (first) {
        const NamespaceQuota& quota = quotas_[spec.namespace_name];
        Resources used = namespace_used_[spec.namespace_name] + spec.total();
        if (quota.cpu_milli && used.cpu_milli > *quota.cpu_milli) refusal = "QuotaExceeded:cpu";
        else if (quota.memory_bytes && used.memory_bytes > *quota.memory_bytes) refusal = "QuotaExceeded:memory";
        else if (quota.gpu && used.gpu > *quota.gpu) refusal = "QuotaExceeded:gpu";
        else if (quota.workloads && namespace_workloads_[spec.namespace_name] + 1 > *quota.workloads) {
          refusal = "QuotaExceeded:count/workloads";
        }
      }
      std::vector<size_t> chosen;
      if (refusal.empty()) {
        for (int32_t t = 0; t < tasks; ++t) {
          if (!place_task(spec, &chosen)) {
            unplace(spec, chosen);  // a gang binds all of its minimum or nothing
            chosen.clear();
            refusal = first && tasks > 1 ? "GangDoesNotFit" : "NoNodeFits";
            break;
          }
        }
      }
      if (!refusal.empty()) {
        decision.reason = refusal;
        ++ns.next;  // give up on this workload for this pass; its namespace goes on
      } else {
        if (first) {
          decision.admitted = true;
          namespace_used_[spec.namespace_name] += spec.total();
          namespace_workloads_[spec.namespace_name] += 1;
        }
        decision.reason.clear();
        for (size_t node : chosen) decision.nodes.push_back(spec_.nodes[node].name);
        placed_tasks[w] += tasks;
        queue_allocated_[queue_name] += amount;
        queue_namespace_allocated_[{queue_name, ns.name}] += amount;
        if (placed_tasks[w] >= spec.replicas) ++ns.next;
      }
      if (ns.next < ns.workloads.size()) heaps[q].push({ns_share(q, ns), ns.name, n});
    }
  };
  run_pass(/*capped=*/true);
  if (spec_.borrowing) {
    // Idle capacity goes to queues with pending work, still in fair-share order.
    for (auto& queue : queues) {
      for (auto& ns : queue.namespaces) {
        ns.next = 0;
        ns.workloads.erase(std::remove_if(ns.workloads.begin(), ns.workloads.end(),
                                          [&](size_t w) { return placed_tasks[w] >= pending[w].spec.replicas; }),
                           ns.workloads.end());
      }
    }
    run_pass(/*capped=*/false);
  }

  for (size_t q = 0; q < queues.size(); ++q) {
    QueueReport report{spec_.queues[q].name, spec_.queues[q].weight, queues[q].deserved,
                       queue_allocated_[spec_.queues[q].name], {}};
    for (const auto& ns : queues[q].namespaces) {
      report.namespaces.push_back({ns.name, namespace_weight(ns.name),
                                   queue_namespace_allocated_[{report.name, ns.name}]});
    }
    std::sort(report.namespaces.begin(), report.namespaces.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    result.queues.push_back(std::move(report));
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    auto& decision = result.workloads[i];
    if (decision.admitted && placed_tasks[i] < pending[i].spec.replicas && decision.reason.empty()) {
      decision.reason = "PartiallyPlaced";
    }
  }
  return result;
}

}  // namespace shoal::cluster::reference
