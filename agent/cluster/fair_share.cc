#include "agent/cluster/fair_share.h"

#include <algorithm>
#include <climits>
#include <queue>
#include <set>

namespace shoal::cluster {
namespace {

using model::Resources;

bool node_matches(const model::NodeSpec& node, const model::Labels& selector) {
  for (const auto& [key, value] : selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  return true;
}

double allocation_fraction(const Resources& allocated, const Resources& capacity) {
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

// Deserved share = capacity x weight / sum of weights, per resource.
Resources share_of(const Resources& capacity, int64_t weight, int64_t total_weight) {
  return {capacity.cpu_milli * weight / total_weight, capacity.memory_bytes * weight / total_weight,
          capacity.gpu * weight / total_weight};
}

}  // namespace

double dominant_share(const Resources& used, const Resources& capacity) {
  double share = 0;
  if (capacity.cpu_milli > 0) share = std::max(share, static_cast<double>(used.cpu_milli) / static_cast<double>(capacity.cpu_milli));
  if (capacity.memory_bytes > 0) share = std::max(share, static_cast<double>(used.memory_bytes) / static_cast<double>(capacity.memory_bytes));
  if (capacity.gpu > 0) share = std::max(share, static_cast<double>(used.gpu) / static_cast<double>(capacity.gpu));
  return share;
}

Result<FairShareScheduler> FairShareScheduler::create(const model::ClusterSpec& spec) {
  FairShareScheduler scheduler(spec);
  for (const auto& node : spec.nodes) scheduler.capacity_ += node.capacity;
  scheduler.allocated_.assign(spec.nodes.size(), Resources{});
  for (size_t n = 0; n < spec.nodes.size(); ++n) scheduler.node_index_[spec.nodes[n].name] = n;
  for (size_t i = 0; i < spec.resource_quotas.size(); ++i) {
    const auto& quota = spec.resource_quotas[i];
    NamespaceQuota& limits = scheduler.quotas_[quota.namespace_name];
    for (const auto& [key, value] : quota.hard) {
      std::string field = "cluster manifest spec.resourceQuotas[" + std::to_string(i) + "].hard." + key;
      if (key == "shoal.dev/namespace.weight" || key == "volcano.sh/namespace.weight") {
        // A missing, non-integer or non-positive weight counts as 1; the highest wins.
        int64_t weight = 1;
        try {
          size_t used = 0;
          long long parsed = std::stoll(value, &used);
          if (used == value.size() && parsed > 0) weight = parsed;
        } catch (...) {
        }
        int64_t& current = scheduler.namespace_weights_[quota.namespace_name];
        current = std::max(current, weight);
        continue;
      }
      // Several quotas on one namespace all apply: the tightest limit wins.
      auto tighten = [](std::optional<int64_t>& limit, int64_t candidate) {
        limit = limit ? std::min(*limit, candidate) : candidate;
      };
      if (key == "cpu" || key == "requests.cpu" || key == "limits.cpu") {
        SHOAL_ASSIGN_OR_RETURN(int64_t v, model::parse_cpu_milli(value, field));
        tighten(limits.cpu_milli, v);
      } else if (key == "memory" || key == "requests.memory" || key == "limits.memory") {
        SHOAL_ASSIGN_OR_RETURN(int64_t v, model::parse_memory_bytes(value, field));
        tighten(limits.memory_bytes, v);
      } else if (key == "gpu" || key == "requests.gpu" || key == "limits.gpu") {
        SHOAL_ASSIGN_OR_RETURN(int64_t v, model::parse_count(value, field));
        tighten(limits.gpu, v);
      } else if (key == "count/workloads") {
        SHOAL_ASSIGN_OR_RETURN(int64_t v, model::parse_count(value, field));
        tighten(limits.workloads, v);
      } else {
        return invalid_argument(field + ": unknown quota key (expected cpu, memory, gpu, "
                                        "requests.*, limits.*, count/workloads or "
                                        "shoal.dev/namespace.weight)");
      }
    }
  }
  return scheduler;
}

Result<std::vector<std::string>> FairShareScheduler::admit(const std::string& key,
                                                           const model::WorkloadSpec& spec) {
  model::WorkloadSpec whole = spec;
  whole.min_available = 0;  // a reservation holds every replica
  ScheduleResult result = allocate({{key, whole}});
  const WorkloadDecision& decision = result.workloads.front();
  if (!decision.admitted) return Status(ErrorCode::kUnavailable, decision.reason);
  return decision.nodes;
}

void FairShareScheduler::release(const model::WorkloadSpec& spec, const std::vector<std::string>& nodes) {
  for (const auto& name : nodes) {
    auto it = node_index_.find(name);
    if (it != node_index_.end()) allocated_[it->second] -= spec.resources;
  }
  Resources amount = spec.resources * static_cast<int64_t>(nodes.size());
  namespace_used_[spec.namespace_name] -= spec.total();
  namespace_workloads_[spec.namespace_name] -= 1;
  queue_allocated_[spec.queue] -= amount;
  queue_namespace_allocated_[{spec.queue, spec.namespace_name}] -= amount;
}

Status FairShareScheduler::restore(const model::WorkloadSpec& spec, const std::vector<std::string>& nodes) {
  std::vector<Resources> trial = allocated_;
  for (const auto& name : nodes) {
    auto it = node_index_.find(name);
    if (it == node_index_.end()) return not_found("node " + name + " is no longer in the cluster");
    trial[it->second] += spec.resources;
    if (!spec_.nodes[it->second].capacity.fits(trial[it->second])) {
      return Status(ErrorCode::kUnavailable, "node " + name + " no longer has room");
    }
  }
  allocated_ = std::move(trial);
  Resources amount = spec.resources * static_cast<int64_t>(nodes.size());
  namespace_used_[spec.namespace_name] += spec.total();
  namespace_workloads_[spec.namespace_name] += 1;
  queue_allocated_[spec.queue] += amount;
  queue_namespace_allocated_[{spec.queue, spec.namespace_name}] += amount;
  return Status::ok();
}

Resources FairShareScheduler::quota_headroom(const std::string& namespace_name) const {
  constexpr int64_t kUnlimited = INT64_MAX / 4;
  Resources headroom{kUnlimited, kUnlimited, kUnlimited};
  auto quota = quotas_.find(namespace_name);
  if (quota == quotas_.end()) return headroom;
  auto used_it = namespace_used_.find(namespace_name);
  Resources used = used_it == namespace_used_.end() ? Resources{} : used_it->second;
  if (quota->second.cpu_milli) headroom.cpu_milli = std::max<int64_t>(0, *quota->second.cpu_milli - used.cpu_milli);
  if (quota->second.memory_bytes) headroom.memory_bytes = std::max<int64_t>(0, *quota->second.memory_bytes - used.memory_bytes);
  if (quota->second.gpu) headroom.gpu = std::max<int64_t>(0, *quota->second.gpu - used.gpu);
  return headroom;
}

std::optional<Resources> FairShareScheduler::queue_headroom(const std::string& queue) const {
  constexpr int64_t kUnlimited = INT64_MAX / 4;
  int64_t total_weight = 0;
  const model::QueueSpec* found = nullptr;
  for (const auto& q : spec_.queues) {
    total_weight += q.weight;
    if (q.name == queue) found = &q;
  }
  if (!found) return std::nullopt;
  if (spec_.borrowing) return Resources{kUnlimited, kUnlimited, kUnlimited};
  Resources deserved = share_of(capacity_, found->weight, total_weight);
  auto it = queue_allocated_.find(queue);
  Resources used = it == queue_allocated_.end() ? Resources{} : it->second;
  return Resources{std::max<int64_t>(0, deserved.cpu_milli - used.cpu_milli),
                   std::max<int64_t>(0, deserved.memory_bytes - used.memory_bytes),
                   std::max<int64_t>(0, deserved.gpu - used.gpu)};
}

int64_t FairShareScheduler::namespace_weight(const std::string& namespace_name) const {
  auto it = namespace_weights_.find(namespace_name);
  return it == namespace_weights_.end() || it->second < 1 ? 1 : it->second;
}

ScheduleResult FairShareScheduler::allocate(const std::vector<ScheduleRequest>& pending) {
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

}  // namespace shoal::cluster
