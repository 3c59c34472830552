#include "agent/placement/engine.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

namespace shoal::placement {
namespace {

using model::ClusterCandidate;
using model::PlacementSpec;
using model::WorkloadSpec;

const std::string* topology_value(const ClusterCandidate& c, const model::SpreadConstraint& term) {
  const auto& source = term.key_is_claim ? c.claims : c.labels;
  auto it = source.find(term.topology_key);
  return it == source.end() ? nullptr : &it->second;
}

// Rule 1: every predicate a cluster must pass, with the first failure kept.
// Clusters marked `placed` go to `placed` (when given) instead.
std::vector<const ClusterCandidate*> filter(const WorkloadSpec& workload, const PlacementSpec& policy,
                                            const std::vector<ClusterCandidate>& clusters,
                                            std::vector<FilteredCluster>* filtered,
                                            std::vector<const ClusterCandidate*>* placed = nullptr) {
  std::vector<const ClusterCandidate*> eligible;
  for (const auto& c : clusters) {
    std::string reason;
    bool lacks_only_room = false;
    if (c.placed) {
      if (placed) placed->push_back(&c);
      filtered->push_back({c.name, "HoldsAnotherCopy", false});
      continue;
    }
    if (!policy.clusters.empty() &&
        std::find(policy.clusters.begin(), policy.clusters.end(), c.name) == policy.clusters.end()) {
      reason = "NotInAllowList";
    } else if (!policy.cluster_selector.matches(c.labels)) {
      reason = "ClusterSelectorMismatch";
    } else if (!policy.claim_selector.matches(c.claims)) {
      reason = "ClaimSelectorMismatch";
    } else if (c.namespaces && std::find(c.namespaces->begin(), c.namespaces->end(),
                                         workload.namespace_name) == c.namespaces->end()) {
      reason = "NamespaceNotInvited";
    } else if (!c.largest_free_node.fits(workload.resources)) {
      reason = "ReplicaDoesNotFitLargestFreeNode";
      lacks_only_room = true;
    } else if (!c.free.fits(workload.total())) {
      reason = "ReplicasDoNotFitFreeCapacity";
      lacks_only_room = true;
    } else {
      for (const auto& term : policy.spread_constraints) {
        if (term.when_unsatisfiable == model::WhenUnsatisfiable::kDoNotSchedule &&
            !topology_value(c, term)) {
          reason = "MissingTopologyKey:" + term.topology_key;
          break;
        }
      }
    }
    if (reason.empty()) eligible.push_back(&c);
    else
      filtered->push_back({c.name, reason, lacks_only_room});
  }
  return eligible;
}

double routing_count(const ClusterCandidate& c, const WorkloadSpec& workload,
                     const model::RoutingPolicy& routing) {
  if (routing.metric == model::RoutingMetric::kQueue) {
    auto it = c.queue_counts.find(workload.queue);
    return it == c.queue_counts.end() ? 0 : static_cast<double>(it->second);
  }
  model::UsageCounts counts;
  if (routing.domain == model::RoutingDomain::kCluster) {
    counts = c.cluster_counts;
  } else if (auto it = c.namespace_counts.find(workload.namespace_name); it != c.namespace_counts.end()) {
    counts = it->second;
  }
  switch (routing.metric) {
    case model::RoutingMetric::kWorkloads: return static_cast<double>(counts.workloads);
    case model::RoutingMetric::kCpu: return static_cast<double>(counts.cpu_milli);
    case model::RoutingMetric::kMemory: return static_cast<double>(counts.memory_bytes);
    default: return 0;
  }
}

// Rule 2: weighted routing picks one cluster.
void route(const WorkloadSpec& workload, const model::RoutingPolicy& routing,
           const std::vector<const ClusterCandidate*>& eligible, const PlaceOptions& options,
           PlacementOutcome* out) {
  // One weight lookup per cluster; the policy's map is keyed by name.
  struct Weighted {
    const ClusterCandidate* cluster;
    double weight;
    double count;
  };
  std::vector<Weighted> weighted;
  weighted.reserve(eligible.size());
  double weight_sum = 0, count_sum = 0;
  for (const auto* c : eligible) {
    auto it = routing.weights.find(c->name);
    if (it == routing.weights.end()) {
      out->filtered.push_back({c->name, "NoRoutingWeight", false});
      continue;
    }
    double count = routing.metric == model::RoutingMetric::kRandom ? 0 : routing_count(*c, workload, routing);
    weighted.push_back({c, static_cast<double>(it->second), count});
    weight_sum += static_cast<double>(it->second);
    count_sum += count;
  }
  if (weighted.empty() || weight_sum <= 0) {
    out->reason = "no eligible cluster has a routing weight above 0";
    return;
  }
  if (routing.metric == model::RoutingMetric::kRandom) {
    // The walk is in name order, so the same draw always picks the same cluster.
    std::sort(weighted.begin(), weighted.end(),
              [](const Weighted& a, const Weighted& b) { return a.cluster->name < b.cluster->name; });
    if (!options.draw) {
      out->reason = "routing metric \"\" needs a draw";
      return;
    }
    double r = *options.draw;
    out->draw = r;
    double cumulative = 0;
    for (const auto& w : weighted) {
      cumulative += w.weight;
      if (cumulative > r) {
        out->decisions.push_back(w.cluster->name);
        return;
      }
    }
    out->reason = "draw " + std::to_string(r) + " is not below the weight sum";
    return;
  }
  const ClusterCandidate* best = nullptr;
  double best_difference = 0;
  for (const auto& w : weighted) {
    double weight_ratio = w.weight / weight_sum;
    double current_ratio = count_sum > 0 ? w.count / count_sum : 0;
    double difference = weight_ratio - current_ratio;
    if (!best || difference > best_difference + 1e-12 ||
        (std::abs(difference - best_difference) <= 1e-12 && w.cluster->name < best->name)) {
      best = w.cluster;
      best_difference = difference;
    }
    if (options.explain) out->routing.push_back({w.cluster->name, weight_ratio, current_ratio, difference});
  }
  if (options.explain) {
    std::sort(out->routing.begin(), out->routing.end(),
              [](const RoutingRow& a, const RoutingRow& b) { return a.cluster < b.cluster; });
  }
  out->decisions.push_back(best->name);
}

// Prioritizer weights after mode defaults: Additive gives Spread 2 and every
// named score 1; Exact uses only what is configured.
struct Weights {
  double spread = 0;
  std::map<std::string, double> others;
};

Weights prioritizer_weights(const PlacementSpec& policy, const std::vector<const ClusterCandidate*>& eligible) {
  Weights w;
  if (!policy.exact_mode) {
    w.spread = 2;
    for (const auto* c : eligible) {
      for (const auto& [name, score] : c->scores) w.others[name] = 1;
    }
  }
  for (const auto& config : policy.prioritizers) {
    if (config.name == "Spread") w.spread = static_cast<double>(config.weight);
    else w.others[config.name] = static_cast<double>(config.weight);
  }
  return w;
}

// Scales values linearly to [-100, 100]; all equal gives 0.
std::vector<double> normalize(const std::vector<double>& values) {
  std::vector<double> out(values.size(), 0);
  if (values.empty()) return out;
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  if (*hi - *lo <= 0) return out;
  for (size_t i = 0; i < values.size(); ++i) out[i] = -100 + 200 * (values[i] - *lo) / (*hi - *lo);
  return out;
}

std::vector<double> static_scores(const Weights& weights, const std::vector<const ClusterCandidate*>& eligible) {
  std::vector<double> total(eligible.size(), 0);
  for (const auto& [name, weight] : weights.others) {
    if (weight == 0) continue;
    std::vector<double> score(eligible.size(), 0);
    if (name == "Balance") {
      int64_t most = 0;
      for (const auto* c : eligible) most = std::max(most, c->source_workloads);
      for (size_t i = 0; i < eligible.size(); ++i) {
        score[i] = most == 0 ? 0 : 100 - 200.0 * static_cast<double>(eligible[i]->source_workloads) /
                                             static_cast<double>(most);
      }
    } else if (name == "Steady") {
      for (size_t i = 0; i < eligible.size(); ++i) score[i] = eligible[i]->previously_selected ? 100 : 0;
    } else if (name == "ResourceAllocatableCPU" || name == "ResourceAllocatableMemory") {
      // The cluster's size (its free room where it does not say), scaled
      // over the candidates.
      bool cpu = name.ends_with("CPU");
      std::vector<double> amount;
      for (const auto* c : eligible) {
        const model::Resources& r = (cpu ? c->allocatable.cpu_milli : c->allocatable.memory_bytes) > 0
                                        ? c->allocatable
                                        : c->free;
        amount.push_back(static_cast<double>(cpu ? r.cpu_milli : r.memory_bytes));
      }
      score = normalize(amount);
    } else if (name == "ResourceFreeCPU" || name == "ResourceFreeMemory") {
      // The share of the cluster left free (-100 full .. 100 idle), like
      // Kubernetes' LeastAllocated: a cluster's own load, not its rank
      // among the others, so a few millicores' difference between two
      // roomy clusters changes nothing. Scaled over the candidates when
      // their sizes are not known (offline inventories).
      bool cpu = name.ends_with("CPU");
      bool sizes_known = std::all_of(eligible.begin(), eligible.end(), [&](const ClusterCandidate* c) {
        return (cpu ? c->allocatable.cpu_milli : c->allocatable.memory_bytes) > 0;
      });
      std::vector<double> amount;
      for (const auto* c : eligible) {
        double free = static_cast<double>(cpu ? c->free.cpu_milli : c->free.memory_bytes);
        double size = static_cast<double>(cpu ? c->allocatable.cpu_milli : c->allocatable.memory_bytes);
        amount.push_back(sizes_known ? std::clamp(200 * free / size - 100, -100.0, 100.0) : free);
      }
      score = sizes_known ? amount : normalize(amount);
    } else {
      for (size_t i = 0; i < eligible.size(); ++i) {
        auto it = eligible[i]->scores.find(name);
        score[i] = it == eligible[i]->scores.end() ? 0 : it->second;
      }
    }
    for (size_t i = 0; i < eligible.size(); ++i) total[i] += weight * score[i];
  }
  return total;
}

}  // namespace

// Rule 3 lives in spread.cc.
void select_spread(const PlacementSpec& policy, const std::vector<const ClusterCandidate*>& selectable,
                   const std::vector<const ClusterCandidate*>& placed,
                   const std::vector<double>& selectable_scores, double spread_weight,
                   const PlaceOptions& options, PlacementOutcome* out);

double routing_weight_sum(const WorkloadSpec& workload, const PlacementSpec& policy,
                          const std::vector<ClusterCandidate>& clusters) {
  if (!policy.routing) return 0;
  std::vector<FilteredCluster> ignored;
  double sum = 0;
  for (const auto* c : filter(workload, policy, clusters, &ignored)) {
    auto it = policy.routing->weights.find(c->name);
    if (it != policy.routing->weights.end()) sum += static_cast<double>(it->second);
  }
  return sum;
}

PlacementOutcome place(const WorkloadSpec& workload, const PlacementSpec& policy,
                       const std::vector<ClusterCandidate>& clusters, const PlaceOptions& options) {
  PlacementOutcome out;
  std::vector<const ClusterCandidate*> placed;
  std::vector<const ClusterCandidate*> eligible = filter(workload, policy, clusters, &out.filtered, &placed);
  if (policy.routing) {
    route(workload, *policy.routing, eligible, options, &out);
    return out;
  }
  Weights weights = prioritizer_weights(policy, eligible);
  std::vector<double> scores = static_scores(weights, eligible);
  select_spread(policy, eligible, placed, scores, weights.spread, options, &out);
  if (out.decisions.size() < static_cast<size_t>(policy.number_of_clusters) && out.reason.empty()) {
    out.reason = "only " + std::to_string(out.decisions.size()) + " of " +
                 std::to_string(policy.number_of_clusters) + " clusters are eligible";
  }
  return out;
}

model::PlacementSpec live_policy(const model::PlacementSpec& placement) {
  model::PlacementSpec policy = placement;
  policy.number_of_clusters = 1;
  if (policy.prioritizers.empty() && !policy.exact_mode) {
    policy.prioritizers = {{"ResourceFreeCPU", 1}, {"Balance", 1}};
  }
  return policy;
}

Ranking rank(const WorkloadSpec& workload, const PlacementSpec& policy,
             const std::vector<ClusterCandidate>& clusters, const PlaceOptions& options) {
  Ranking out;
  PlacementSpec one = policy;
  one.number_of_clusters = 1;
  PlaceOptions explained = options;
  explained.explain = true;
  out.outcome = place(workload, one, clusters, explained);
  if (out.outcome.decisions.empty()) return out;
  if (!one.routing) {
    std::vector<StepCandidate> candidates = out.outcome.steps.front().candidates;
    std::sort(candidates.begin(), candidates.end(), [](const StepCandidate& a, const StepCandidate& b) {
      if (std::abs(a.final_score - b.final_score) > 1e-9) return a.final_score > b.final_score;
      return a.cluster < b.cluster;
    });
    for (const auto& c : candidates) out.ranked.push_back({c.cluster, c.final_score});
    return out;
  }
  // Routing picks one; the next-best is what it picks without those before.
  std::vector<ClusterCandidate> left = clusters;
  PlaceOptions quiet = options;
  quiet.explain = false;
  std::string pick = out.outcome.decisions.front();
  std::vector<std::string> order;
  while (!pick.empty()) {
    order.push_back(pick);
    double before = routing_weight_sum(workload, one, left);
    std::erase_if(left, [&](const ClusterCandidate& c) { return c.name == pick; });
    double after = routing_weight_sum(workload, one, left);
    if (quiet.draw && before > 0) quiet.draw = *quiet.draw * after / before;  // the same place in the rest
    PlacementOutcome next = place(workload, one, left, quiet);
    pick = next.decisions.empty() ? "" : next.decisions.front();
  }
  for (size_t i = 0; i < order.size(); ++i) {
    out.ranked.push_back({order[i], 1000.0 * static_cast<double>(order.size() - i)});
  }
  return out;
}

}  // namespace shoal::placement
