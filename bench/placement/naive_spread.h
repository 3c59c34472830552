// The baseline the engine is measured against: a straightforward selectOne
// that re-scans every cluster each step, keying domains by strings. Same
// rules as agent/placement/spread.cc (no explanation), O(N x C x terms).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "model/placement_spec.h"

namespace shoal::bench {

inline std::vector<std::string> naive_spread(const model::PlacementSpec& policy,
                                             const std::vector<model::ClusterCandidate>& clusters) {
  const auto& terms = policy.spread_constraints;
  auto prefix = [&](const model::ClusterCandidate& c, size_t t) {
    std::string key;
    for (size_t i = 0; i <= t; ++i) key += c.labels.at(terms[i].topology_key) + "/";
    return key;
  };
  auto parent = [&](const model::ClusterCandidate& c, size_t t) { return t == 0 ? std::string() : prefix(c, t - 1); };
  std::vector<std::string> decisions;
  std::vector<bool> selected(clusters.size(), false);
  std::map<std::string, int64_t> count;  // domain prefix -> selected
  while (decisions.size() < static_cast<size_t>(policy.number_of_clusters)) {
    // Sibling min/max per (term, parent), over domains holding any cluster.
    std::vector<std::map<std::string, std::pair<int64_t, int64_t>>> range(terms.size());
    for (const auto& c : clusters) {
      for (size_t t = 0; t < terms.size(); ++t) {
        int64_t n = count[prefix(c, t)];
        auto [it, fresh] = range[t].emplace(parent(c, t), std::make_pair(n, n));
        if (!fresh) {
          it->second.first = std::min(it->second.first, n);
          it->second.second = std::max(it->second.second, n);
        }
      }
    }
    std::vector<size_t> live;
    std::vector<double> packed;
    for (size_t i = 0; i < clusters.size(); ++i) {
      if (selected[i]) continue;
      double score = 0;
      bool excluded = false;
      for (size_t t = 0; t < terms.size(); ++t) {
        int64_t n = count[prefix(clusters[i], t)];
        auto [lo, hi] = range[t][parent(clusters[i], t)];
        if (terms[t].when_unsatisfiable == model::WhenUnsatisfiable::kDoNotSchedule &&
            n + 1 - lo > terms[t].max_skew) {
          excluded = true;
        }
        score = score * 64 + (hi == lo ? 0 : std::round(63.0 * static_cast<double>(hi - n) / static_cast<double>(hi - lo)));
      }
      if (excluded) continue;
      live.push_back(i);
      packed.push_back(score);
    }
    if (live.empty()) break;
    double lo = *std::min_element(packed.begin(), packed.end());
    double hi = *std::max_element(packed.begin(), packed.end());
    size_t best = live[0];
    double best_final = -1e18;
    for (size_t k = 0; k < live.size(); ++k) {
      double final_score = 2 * (hi > lo ? -100 + 200 * (packed[k] - lo) / (hi - lo) : 0);
      if (final_score > best_final + 1e-9 ||
          (std::abs(final_score - best_final) <= 1e-9 && clusters[live[k]].name < clusters[best].name)) {
        best = live[k];
        best_final = final_score;
      }
    }
    selected[best] = true;
    decisions.push_back(clusters[best].name);
    for (size_t t = 0; t < terms.size(); ++t) ++count[prefix(clusters[best], t)];
  }
  return decisions;
}

// Weighted routing with a metric, the obvious way: one pass to sum, one to pick.
inline std::string naive_route(const model::PlacementSpec& policy,
                               const std::vector<model::ClusterCandidate>& clusters) {
  double weights = 0, counts = 0;
  for (const auto& c : clusters) {
    weights += static_cast<double>(policy.routing->weights.at(c.name));
    counts += static_cast<double>(c.cluster_counts.workloads);
  }
  std::string best;
  double best_difference = -1e18;
  for (const auto& c : clusters) {
    double difference = static_cast<double>(policy.routing->weights.at(c.name)) / weights -
                        static_cast<double>(c.cluster_counts.workloads) / counts;
    if (difference > best_difference + 1e-12 || (std::abs(difference - best_difference) <= 1e-12 && c.name < best)) {
      best = c.name;
      best_difference = difference;
    }
  }
  return best;
}

}  // namespace shoal::bench
