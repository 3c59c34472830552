// Invariants of the placement engine over generated inventories.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <random>
#include <set>

#include "agent/placement/engine.h"

namespace shoal::placement {
namespace {

model::WorkloadSpec small_workload() {
  model::WorkloadSpec w;
  w.name = "w";
  w.resources = {1000, 1 << 20, 0};
  return w;
}

// Clusters spread over `zone_count` zones with the given sizes.
std::vector<model::ClusterCandidate> zoned(const std::vector<int>& zone_sizes) {
  std::vector<model::ClusterCandidate> out;
  for (size_t z = 0; z < zone_sizes.size(); ++z) {
    for (int i = 0; i < zone_sizes[z]; ++i) {
      model::ClusterCandidate c;
      c.name = "z" + std::to_string(z) + "-c" + std::to_string(i);
      c.labels = {{"zone", "zone-" + std::to_string(z)}};
      c.free = {64000, int64_t{64} << 30, 0};
      c.largest_free_node = {16000, int64_t{16} << 30, 0};
      out.push_back(c);
    }
  }
  return out;
}

std::map<std::string, int> zone_counts(const std::vector<model::ClusterCandidate>& clusters,
                                       const std::vector<std::string>& decisions) {
  std::map<std::string, int> counts;
  for (const auto& c : clusters) counts[c.labels.at("zone")] += 0;
  for (const auto& name : decisions) {
    for (const auto& c : clusters) {
      if (c.name == name) ++counts[c.labels.at("zone")];
    }
  }
  return counts;
}

int skew(const std::map<std::string, int>& counts) {
  int lo = INT32_MAX, hi = 0;
  for (const auto& [zone, n] : counts) {
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  return hi - lo;
}

RC_GTEST_PROP(SpreadProperty, DecisionsAreDistinctAndNeverBreakDoNotSchedule, ()) {
  auto zone_sizes = *rc::gen::container<std::vector<int>>(
      *rc::gen::inRange<size_t>(1, 5), rc::gen::inRange(1, 6));
  int max_skew = *rc::gen::inRange(1, 3);
  int wanted = *rc::gen::inRange(1, 20);
  auto clusters = zoned(zone_sizes);
  for (auto& c : clusters) c.scores["noise"] = *rc::gen::inRange(-100, 101);
  model::PlacementSpec policy;
  policy.number_of_clusters = wanted;
  policy.spread_constraints.push_back(
      {"zone", false, max_skew, model::WhenUnsatisfiable::kDoNotSchedule});
  PlacementOutcome out = place(small_workload(), policy, clusters, {});
  std::set<std::string> distinct(out.decisions.begin(), out.decisions.end());
  RC_ASSERT(distinct.size() == out.decisions.size());
  RC_ASSERT(out.decisions.size() <= static_cast<size_t>(wanted));
  RC_ASSERT(skew(zone_counts(clusters, out.decisions)) <= max_skew);
  if (out.decisions.size() < static_cast<size_t>(wanted)) RC_ASSERT(!out.reason.empty());
}

RC_GTEST_PROP(SpreadProperty, ScheduleAnywayWithEnoughClustersReachesMaxSkew, ()) {
  size_t zones = *rc::gen::inRange<size_t>(2, 6);
  int wanted = *rc::gen::inRange(1, 16);
  // Every zone can hold all N, so only the score steers.
  auto clusters = zoned(std::vector<int>(zones, wanted));
  model::PlacementSpec policy;
  policy.number_of_clusters = wanted;
  policy.spread_constraints.push_back({"zone", false, 1, model::WhenUnsatisfiable::kScheduleAnyway});
  PlacementOutcome out = place(small_workload(), policy, clusters, {});
  RC_ASSERT(out.decisions.size() == static_cast<size_t>(wanted));
  RC_ASSERT(skew(zone_counts(clusters, out.decisions)) <= 1);
}

TEST(RoutingProperty, RandomMetricMatchesTheWeights) {
  model::PlacementSpec policy;
  policy.routing = model::RoutingPolicy{{{"a", 15}, {"b", 10}, {"c", 5}}, model::RoutingMetric::kRandom,
                                        model::RoutingDomain::kNamespace};
  std::vector<model::ClusterCandidate> clusters = zoned({3});
  clusters[0].name = "a";
  clusters[1].name = "b";
  clusters[2].name = "c";
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> uniform(0, 30);
  std::map<std::string, int> picks;
  const int draws = 10000;
  for (int i = 0; i < draws; ++i) {
    PlacementOutcome out = place(small_workload(), policy, clusters, {false, uniform(rng)});
    ASSERT_EQ(out.decisions.size(), 1u);
    ++picks[out.decisions[0]];
  }
  double chi_square = 0;
  for (const auto& [name, weight] : policy.routing->weights) {
    double expected = draws * static_cast<double>(weight) / 30.0;
    chi_square += (picks[name] - expected) * (picks[name] - expected) / expected;
  }
  // Two degrees of freedom: the 0.1% critical value is 13.82.
  EXPECT_LT(chi_square, 13.82) << "a " << picks["a"] << " b " << picks["b"] << " c " << picks["c"];
}

}  // namespace
}  // namespace shoal::placement
