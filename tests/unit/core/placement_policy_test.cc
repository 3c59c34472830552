// The running federation places by the workload's whole policy,
// over what targets advertise (labels, claims, allocatable, counts) and
// what the source itself just sent.
#include <gtest/gtest.h>

#include <map>

#include "tests/unit/core/world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;

std::map<std::string, int> placements_by_cluster(Node& source) {
  std::map<std::string, int> out;
  for (const auto& record : source.agent->operations().workloads()) ++out[record.cluster];
  return out;
}

// A source too small for any of the work, and `count` targets alike.
struct Federation {
  World world;
  Node* source;
  std::vector<Node*> targets;
  Federation(int count, const std::function<void(int, model::ClusterSpec&)>& customize = nullptr,
             int nodes = 4, int64_t cpu_each = 64000) {
    source = &world.add("source", 1, 100);
    for (int i = 0; i < count; ++i) {
      std::string name = std::string(1, static_cast<char>('a' + i));
      targets.push_back(&world.add(name, nodes, cpu_each, [&](model::ClusterSpec& spec) {
        if (customize) customize(i, spec);
      }));
    }
    for (Node* target : targets) world.invite(*target, *source);
    world.run_for(2s);
  }
};

TEST(PlacementPolicyTest, ABurstOverEqualTargetsIsSharedEvenly) {
  // Whoever answers first used to win: 470 of 500 went to one target.
  Federation f(8);
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 500; ++i) specs.push_back(workload("job-" + std::to_string(i), 1000, 3600s));
  ASSERT_TRUE(f.source->agent->operations().submit(specs).is_ok());
  f.world.run_for(10s);
  std::map<std::string, int> placed = placements_by_cluster(*f.source);
  ASSERT_EQ(placed.size(), 8u);
  for (const auto& [cluster, count] : placed) {
    EXPECT_LE(count, 500 / 8 * 3 / 2) << cluster << " has more than 1.5x an even share";
  }
}

TEST(PlacementPolicyTest, ABurstRoutedByWorkloadsFollowsTheWeights) {
  Federation f(3);
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 100; ++i) {
    model::WorkloadSpec spec = workload("job-" + std::to_string(i), 100, 3600s);
    spec.placement.routing = model::RoutingPolicy{{{"a", 1}, {"b", 2}, {"c", 1}},
                                                  model::RoutingMetric::kWorkloads,
                                                  model::RoutingDomain::kNamespace};
    specs.push_back(spec);
  }
  ASSERT_TRUE(f.source->agent->operations().submit(specs).is_ok());
  f.world.run_for(10s);
  std::map<std::string, int> placed = placements_by_cluster(*f.source);
  // The source counts what it sent but the targets do not count yet.
  EXPECT_NEAR(placed["a"], 25, 2);
  EXPECT_NEAR(placed["b"], 50, 2);
  EXPECT_NEAR(placed["c"], 25, 2);
}

TEST(PlacementPolicyTest, ABurstRoutedToItsOwnClusterCountsWhatItSentThereToo) {
  World world;
  Node& source = world.add("source", 4, 64000);
  Node& a = world.add("a", 4, 64000);
  world.invite(a, source);
  world.run_for(2s);
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 40; ++i) {
    model::WorkloadSpec spec = workload("job-" + std::to_string(i), 100, 3600s);
    spec.placement.routing = model::RoutingPolicy{{{"source", 1}, {"a", 1}}, model::RoutingMetric::kWorkloads,
                                                  model::RoutingDomain::kNamespace};
    specs.push_back(spec);
  }
  ASSERT_TRUE(source.agent->operations().submit(specs).is_ok());
  world.run_for(10s);
  std::map<std::string, int> placed = placements_by_cluster(source);
  EXPECT_NEAR(placed["source"], 20, 2);
  EXPECT_NEAR(placed["a"], 20, 2);
}

TEST(PlacementPolicyTest, ASelectorMatchesTheAdvertisedLabelsOnly) {
  Federation f(3, [](int i, model::ClusterSpec& spec) {
    spec.labels = {{"region", i == 1 ? "us-west" : "us-east"}};
    spec.claims = {{"platform", i == 2 ? "gpu" : "cpu"}};
  });
  model::WorkloadSpec west = workload("west", 1000, 3600s);
  west.placement.cluster_selector.match_labels = {{"region", "us-west"}};
  model::WorkloadSpec gpu = workload("gpu", 1000, 3600s);
  gpu.placement.claim_selector.match_labels = {{"platform", "gpu"}};
  model::WorkloadSpec nowhere = workload("nowhere", 1000, 3600s);
  nowhere.placement.cluster_selector.match_labels = {{"region", "eu-north"}};
  ASSERT_TRUE(f.source->agent->operations().submit({west, gpu, nowhere}).is_ok());
  f.world.run_for(3s);
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "west")->cluster, "b");
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "gpu")->cluster, "c");
  EXPECT_EQ(phase_of(*f.source, "nowhere"), model::Phase::kPending);
  EXPECT_NE(reason_of(*f.source, "nowhere").find("a=ClusterSelectorMismatch"), std::string::npos)
      << reason_of(*f.source, "nowhere");
}

TEST(PlacementPolicyTest, AHiddenLabelNeverLeavesTheTargetNorMatches) {
  Federation f(2, [](int i, model::ClusterSpec& spec) {
    spec.labels = {{"region", "us-east"}, {"tenant", i == 0 ? "secret-tenant-a" : "secret-tenant-b"}};
  });
  // Target a hides "tenant"; its CAPACITY must not carry the key or value.
  Node& a = *f.targets[0];
  f.world.configure = [](AgentConfig& config) {
    if (config.cluster == "a") config.disclose.labels = {"region"};
  };
  f.world.restart(a);
  bool saw_facts = false;
  f.world.deliver([&](const Wire& w) {
    if (w.from != a.id || w.type != protocol::MessageType::kCapacity) return true;
    std::string bytes(w.bytes.begin(), w.bytes.end());
    EXPECT_EQ(bytes.find("secret-tenant-a"), std::string::npos) << "the hidden label's value went out";
    EXPECT_EQ(bytes.find("tenant"), std::string::npos) << "the hidden label's key went out";
    protocol::DropReason reason;
    auto envelope = protocol::open(w.bytes, &reason);
    EXPECT_TRUE(envelope.is_ok());
    if (envelope.is_ok()) {
      auto body = protocol::decode_body(protocol::MessageType::kCapacity, envelope->body);
      EXPECT_TRUE(body.is_ok());
      if (body.is_ok()) {
        const auto& capacity = std::get<protocol::Capacity>(*body);
        if (capacity.cluster && capacity.cluster->labels) {
          saw_facts = true;
          EXPECT_EQ(*capacity.cluster->labels, (model::Labels{{"region", "us-east"}}));
        }
      }
    }
    return true;
  });
  EXPECT_TRUE(saw_facts) << "a restarted target sends its labels to its sources";
  f.world.run_for(2s);
  model::WorkloadSpec spec = workload("tenant-a", 1000, 3600s);
  spec.placement.cluster_selector.match_expressions = {
      {"tenant", model::LabelRequirement::Operator::kIn, {"secret-tenant-a", "secret-tenant-b"}}};
  ASSERT_TRUE(f.source->agent->operations().submit({spec}).is_ok());
  f.world.run_for(3s);
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "tenant-a")->cluster, "b")
      << "a's tenant label is hidden: only b can match";
}

// Seed 001, use case 3: four clusters in two zones (three in 1a, one in
// 1b); copies spread over zone with maxSkew 1, DoNotSchedule.
TEST(PlacementPolicyTest, SpreadWithDoNotScheduleLeavesACopyPendingWithTheReason) {
  Federation f(4, [](int i, model::ClusterSpec& spec) {
    spec.labels = {{"zone", i < 3 ? "us-east-1a" : "us-east-1b"}};
  });
  model::WorkloadSpec spec = workload("spread", 1000, 3600s);
  spec.placement.number_of_clusters = 4;
  spec.placement.spread_constraints = {{"zone", false, 1, model::WhenUnsatisfiable::kDoNotSchedule}};
  ASSERT_TRUE(f.source->agent->operations().submit({spec}).is_ok());
  f.world.run_for(5s);
  auto copies = f.source->agent->operations().copies_of(
      f.source->agent->operations().find_workload("default", "spread")->uid);
  ASSERT_EQ(copies.size(), 4u);
  std::map<std::string, int> by_zone;
  int pending = 0;
  for (const auto& copy : copies) {
    if (copy.phase == model::Phase::kRunning) {
      ++by_zone[copy.cluster == "d" ? "1b" : "1a"];
    } else {
      ++pending;
      EXPECT_EQ(copy.phase, model::Phase::kPending);
      EXPECT_NE(copy.reason.find("maxSkew"), std::string::npos) << copy.reason;
    }
  }
  EXPECT_EQ(by_zone["1a"], 2);
  EXPECT_EQ(by_zone["1b"], 1);
  EXPECT_EQ(pending, 1) << "the fourth would make the skew 2";
}

TEST(PlacementPolicyTest, SpreadOfFourCopiesOverTwoZonesPutsTwoInEach) {
  Federation f(4, [](int i, model::ClusterSpec& spec) {
    spec.labels = {{"zone", i % 2 == 0 ? "us-east-1a" : "us-east-1b"}};
  });
  model::WorkloadSpec spec = workload("spread", 1000, 3600s);
  spec.placement.number_of_clusters = 4;
  spec.placement.spread_constraints = {{"zone", false, 1, model::WhenUnsatisfiable::kDoNotSchedule}};
  ASSERT_TRUE(f.source->agent->operations().submit({spec}).is_ok());
  f.world.run_for(5s);
  auto group = f.source->agent->operations().find_workload("default", "spread");
  EXPECT_EQ(group->phase, model::Phase::kRunning) << group->reason;
  std::map<std::string, int> by_zone;
  for (const auto& copy : f.source->agent->operations().copies_of(group->uid)) {
    ++by_zone[copy.cluster == "a" || copy.cluster == "c" ? "1a" : "1b"];
  }
  EXPECT_EQ(by_zone["1a"], 2);
  EXPECT_EQ(by_zone["1b"], 2);
}

TEST(PlacementPolicyTest, ExactPrioritizersRankByAllocatableAlone) {
  // b is the biggest cluster but the busiest; Exact mode with only
  // ResourceAllocatableCPU picks it all the same; the default ranking
  // (share left free, then balance) picks the idle a.
  Federation f(2, [](int i, model::ClusterSpec& spec) {
    if (i == 1) spec.nodes.push_back({"big", {256000, int64_t{64} << 30, 0}, {}});
  });
  model::WorkloadSpec filler = workload("filler", 250000, 3600s);
  filler.placement.clusters = {"b"};
  ASSERT_TRUE(f.source->agent->operations().submit({filler}).is_ok());
  f.world.run_for(3s);
  ASSERT_EQ(phase_of(*f.source, "filler"), model::Phase::kRunning);
  model::WorkloadSpec exact = workload("exact", 1000, 3600s);
  exact.placement.exact_mode = true;
  exact.placement.prioritizers = {{"ResourceAllocatableCPU", 1}};
  model::WorkloadSpec plain = workload("plain", 1000, 3600s);
  ASSERT_TRUE(f.source->agent->operations().submit({exact, plain}).is_ok());
  f.world.run_for(3s);
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "exact")->cluster, "b");
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "plain")->cluster, "a");
}

}  // namespace
}  // namespace shoal::core::testing
