// The seed examples (configs/examples/placement/*) must come out exactly as
// the issue states; plus predicate and prioritizer behavior.
#include <gtest/gtest.h>


#include "agent/placement/engine.h"
#include "common/file.h"
#include "model/manifest.h"
#include "model/placement_parse.h"

namespace shoal::placement {
namespace {

struct Example {
  std::vector<model::ClusterCandidate> clusters;
  model::WorkloadSpec workload;
};

std::string slurp(const std::string& path) { return read_text_file(path).value_or(""); }

Example load(const std::string& name) {
  std::string dir = std::string(SHOAL_SOURCE_DIR) + "/configs/examples/placement/" + name;
  Example example;
  auto clusters = model::parse_inventory(slurp(dir + "/inventory.yaml"));
  EXPECT_TRUE(clusters.is_ok()) << clusters.status().message();
  example.clusters = *clusters;
  auto workloads = model::parse_workloads(slurp(dir + "/workload.yaml"));
  EXPECT_TRUE(workloads.is_ok()) << workloads.status().message();
  example.workload = workloads->front();
  return example;
}

PlacementOutcome run(const Example& e, std::optional<double> draw = std::nullopt) {
  return place(e.workload, e.workload.placement, e.clusters, {true, draw});
}

double difference_of(const PlacementOutcome& out, const std::string& cluster) {
  for (const auto& row : out.routing) {
    if (row.cluster == cluster) return row.difference;
  }
  ADD_FAILURE() << "no routing row for " << cluster;
  return 0;
}

std::map<std::string, int> zones_of(const Example& e, const PlacementOutcome& out) {
  std::map<std::string, int> zones;
  for (const auto& name : out.decisions) {
    for (const auto& c : e.clusters) {
      if (c.name == name) ++zones[c.labels.at("zone")];
    }
  }
  return zones;
}

TEST(RoutingTest, NamespaceDomainPrefersTheMostUnderservedCluster) {
  PlacementOutcome out = run(load("seed000-namespace-domain"));
  EXPECT_EQ(out.decisions, std::vector<std::string>{"A"});
  EXPECT_NEAR(difference_of(out, "A"), 0.0615, 0.0001);
  EXPECT_NEAR(difference_of(out, "C"), -0.0615, 0.0001);
  ASSERT_EQ(out.filtered.size(), 1u);
  EXPECT_EQ(out.filtered[0].cluster, "B");
  EXPECT_EQ(out.filtered[0].reason, "NamespaceNotInvited");
}

TEST(RoutingTest, ClusterDomainCountsTheWholeCluster) {
  PlacementOutcome out = run(load("seed000-cluster-domain"));
  EXPECT_EQ(out.decisions, std::vector<std::string>{"A"});
  EXPECT_NEAR(difference_of(out, "A"), 0.0397, 0.0001);
  EXPECT_NEAR(difference_of(out, "B"), -0.0476, 0.0001);
  EXPECT_NEAR(difference_of(out, "C"), 0.0079, 0.0001);
}

TEST(RoutingTest, RandomMetricWalksClustersInNameOrder) {
  Example e = load("seed000-random-draw17");
  EXPECT_EQ(run(e, 17).decisions, std::vector<std::string>{"C"});
  EXPECT_EQ(run(e, 14).decisions, std::vector<std::string>{"A"});
  EXPECT_EQ(run(e, 0).decisions, std::vector<std::string>{"A"});
  EXPECT_EQ(run(e, 24.99).decisions, std::vector<std::string>{"C"});
  EXPECT_TRUE(run(e, 25).decisions.empty()) << "the draw must be below the weight sum";
  EXPECT_DOUBLE_EQ(routing_weight_sum(e.workload, e.workload.placement, e.clusters), 25);
}

TEST(SpreadTest, WorkedExampleComesOutExactly) {
  PlacementOutcome out = run(load("seed001-worked-example"));
  ASSERT_EQ(out.decisions, (std::vector<std::string>{"c1", "c5"}));
  ASSERT_EQ(out.steps.size(), 2u);
  const Step& second = out.steps[1];
  ASSERT_EQ(second.excluded.size(), 1u);
  EXPECT_EQ(second.excluded[0].cluster, "c2");
  std::map<std::string, std::pair<double, double>> got;
  for (const auto& c : second.candidates) got[c.cluster] = {c.spread, c.final_score};
  EXPECT_EQ(got["c3"], std::make_pair(-100.0, -200.0));
  EXPECT_EQ(got["c4"], std::make_pair(100.0, 200.0));
  EXPECT_EQ(got["c5"], std::make_pair(100.0, 250.0));
}

TEST(SpreadTest, UseCase2SpreadsEvenlyOverZones) {
  Example e = load("seed001-usecase2-even");
  PlacementOutcome out = run(e);
  EXPECT_EQ(zones_of(e, out), (std::map<std::string, int>{{"us-east-1a", 2}, {"us-east-1b", 2}}));
}

TEST(SpreadTest, UseCase3MaxSkewOneStopsAtThreeClusters) {
  Example e = load("seed001-usecase3-maxskew1");
  PlacementOutcome out = run(e);
  EXPECT_EQ(zones_of(e, out), (std::map<std::string, int>{{"us-east-1a", 2}, {"us-east-1b", 1}}));
  EXPECT_NE(out.reason.find("maxSkew"), std::string::npos) << out.reason;
}

TEST(SpreadTest, UseCase3MaxSkewTwoReachesFourClusters) {
  Example e = load("seed001-usecase3-maxskew2");
  EXPECT_EQ(zones_of(e, run(e)), (std::map<std::string, int>{{"us-east-1a", 3}, {"us-east-1b", 1}}));
}

TEST(SpreadTest, UseCase4SpreadsRegionsFirstThenZones) {
  Example e = load("seed001-usecase4-joint");
  PlacementOutcome out = run(e);
  EXPECT_EQ(zones_of(e, out),
            (std::map<std::string, int>{{"us-east-1a", 1}, {"us-east-1b", 1}, {"us-west-1a", 2}}));
  for (const auto& f : out.filtered) EXPECT_EQ(f.reason, "ClusterSelectorMismatch");
}

model::ClusterCandidate cluster(const std::string& name, int64_t free_cpu = 64000) {
  model::ClusterCandidate c;
  c.name = name;
  c.free = {free_cpu, int64_t{256} << 30, 0};
  c.largest_free_node = {std::min<int64_t>(free_cpu, 16000), int64_t{64} << 30, 0};
  return c;
}

TEST(PredicateTest, EachFilteredClusterKeepsItsReason) {
  model::WorkloadSpec w;
  w.name = "w";
  w.replicas = 3;
  w.resources = {8000, 1 << 20, 0};
  model::PlacementSpec p;
  p.clusters = {"a", "b", "c", "d", "e"};
  p.cluster_selector.match_expressions.push_back({"tier", model::LabelRequirement::Operator::kNotIn, {"cold"}});
  std::vector<model::ClusterCandidate> clusters = {cluster("a"), cluster("b"), cluster("c", 4000),
                                                   cluster("d", 16000), cluster("e"), cluster("z")};
  clusters[1].labels["tier"] = "cold";
  clusters[4].namespaces = std::vector<std::string>{"other"};
  PlacementOutcome out = place(w, p, clusters, {});
  EXPECT_EQ(out.decisions, std::vector<std::string>{"a"});
  std::map<std::string, std::string> reasons;
  for (const auto& f : out.filtered) reasons[f.cluster] = f.reason;
  EXPECT_EQ(reasons["b"], "ClusterSelectorMismatch");
  EXPECT_EQ(reasons["c"], "ReplicaDoesNotFitLargestFreeNode");
  EXPECT_EQ(reasons["d"], "ReplicasDoNotFitFreeCapacity");
  EXPECT_EQ(reasons["e"], "NamespaceNotInvited");
  EXPECT_EQ(reasons["z"], "NotInAllowList");
}

TEST(PrioritizerTest, ConfiguredBuiltinsRankClusters) {
  model::WorkloadSpec w;
  w.name = "w";
  w.resources = {1000, 1, 0};
  std::vector<model::ClusterCandidate> clusters = {cluster("a", 20000), cluster("b", 60000), cluster("c", 40000)};
  model::PlacementSpec p;
  p.number_of_clusters = 3;
  p.prioritizers = {{"ResourceAllocatableCPU", 1}};
  EXPECT_EQ(place(w, p, clusters, {}).decisions, (std::vector<std::string>{"b", "c", "a"}));
  clusters[1].source_workloads = 10;
  clusters[2].source_workloads = 5;
  p.prioritizers = {{"Balance", 1}};
  EXPECT_EQ(place(w, p, clusters, {}).decisions, (std::vector<std::string>{"a", "c", "b"}));
  clusters[2].previously_selected = true;
  p.prioritizers = {{"Steady", 1}};
  p.number_of_clusters = 1;
  EXPECT_EQ(place(w, p, clusters, {}).decisions, std::vector<std::string>{"c"});
}

// Live placement: one copy at a time, the others counted.
TEST(RankTest, ACopyPlacedElsewhereCountsInTheSpreadAndIsNoCandidate) {
  // Seed 001's worked example, step 2: c1 already holds a copy.
  Example e = load("seed001-worked-example");
  e.clusters[0].placed = true;
  Ranking ranking = rank(e.workload, e.workload.placement, e.clusters, {});
  std::vector<std::string> order;
  for (const auto& r : ranking.ranked) order.push_back(r.cluster);
  EXPECT_EQ(order, (std::vector<std::string>{"c5", "c4", "c3"})) << "c2 would make zone skew 2";
  EXPECT_EQ(ranking.ranked.front().score, 250);
  EXPECT_EQ(ranking.outcome.decisions, std::vector<std::string>{"c5"}) << "what place() decides second";
}

TEST(RankTest, RoutingRanksTheRoutedClusterThenTheNextBestBySamePolicy) {
  Example e = load("seed000-cluster-domain");
  Ranking ranking = rank(e.workload, e.workload.placement, e.clusters, {});
  std::vector<std::string> order;
  for (const auto& r : ranking.ranked) order.push_back(r.cluster);
  // A +0.0397 first; without A, C (w10, 25) beats B (w10, 30).
  EXPECT_EQ(order, (std::vector<std::string>{"A", "C", "B"}));
}

TEST(PrioritizerTest, FreeShareIsEachClustersOwnAndAllocatableIsItsSize) {
  model::WorkloadSpec w;
  w.name = "w";
  w.resources = {1000, 1, 0};
  std::vector<model::ClusterCandidate> clusters = {cluster("a", 30000), cluster("b", 60000)};
  clusters[0].allocatable = {32000, int64_t{256} << 30, 0};   // nearly idle
  clusters[1].allocatable = {240000, int64_t{256} << 30, 0};  // big, a quarter free
  model::PlacementSpec p;
  p.number_of_clusters = 2;
  p.exact_mode = true;
  p.prioritizers = {{"ResourceFreeCPU", 1}};
  EXPECT_EQ(place(w, p, clusters, {}).decisions, (std::vector<std::string>{"a", "b"}));
  p.prioritizers = {{"ResourceAllocatableCPU", 1}};
  EXPECT_EQ(place(w, p, clusters, {}).decisions, (std::vector<std::string>{"b", "a"}));
}

TEST(PolicyTest, RoutingWithSpreadIsAValidationError) {
  auto parsed = model::parse_workloads(R"(apiVersion: shoal.dev/v1
kind: Workload
metadata: {name: a}
spec:
  resources: {cpu: 1}
  placement:
    routing: {weights: {A: 1}}
    spreadPolicy: {spreadConstraints: [{topologyKey: zone}]}
)");
  ASSERT_FALSE(parsed.is_ok());
  EXPECT_NE(parsed.status().message().find("spec.placement.routing"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("cannot be used together"), std::string::npos);
}

TEST(PolicyTest, BadPolicyFieldsAreNamed) {
  const std::string head = "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: a}\nspec:\n  resources: {cpu: 1}\n  placement:\n";
  auto message = [&](const std::string& body) {
    auto parsed = model::parse_workloads(head + body);
    return parsed.is_ok() ? std::string() : parsed.status().message();
  };
  EXPECT_NE(message("    routing: {weights: {A: 1}, metric: gpus}").find("routing.metric"), std::string::npos);
  EXPECT_NE(message("    spreadPolicy: {spreadConstraints: [{topologyKey: z, maxSkew: 0}]}").find("maxSkew"), std::string::npos);
  EXPECT_NE(message("    clusterSelector: {matchExpressions: [{key: a, operator: Near}]}").find("operator"), std::string::npos);
  EXPECT_NE(message("    numberOfClusters: 0").find("numberOfClusters"), std::string::npos);
  EXPECT_NE(message("    prioritizerPolicy: {mode: Maybe}").find("prioritizerPolicy.mode"), std::string::npos);
}

}  // namespace
}  // namespace shoal::placement
