#include <gtest/gtest.h>

#include "agent/cluster/sim_cluster.h"

namespace shoal::cluster {
namespace {

model::ClusterSpec two_nodes() {
  model::ClusterSpec spec;
  spec.name = "x";
  spec.nodes = {{"n0", {4000, 1000, 0}, {}}, {"n1", {8000, 1000, 1}, {}}};
  return spec;
}

TEST(SimClusterTest, ReservationIsAllOrNothingAndFirstFit) {
  SimCluster cluster(two_nodes());
  auto nodes = cluster.reserve("a", {3000, 100, 0}, 2);
  ASSERT_TRUE(nodes.is_ok());
  EXPECT_EQ(*nodes, (std::vector<std::string>{"n0", "n1"}));
  // 3 more replicas of 3 cpu: only n1 has room for one. Nothing changes.
  EXPECT_FALSE(cluster.reserve("b", {3000, 100, 0}, 2).is_ok());
  EXPECT_EQ(cluster.capacity().free.cpu_milli, 6000);
  EXPECT_EQ(cluster.capacity().largest_free_node.cpu_milli, 5000);
  EXPECT_TRUE(cluster.check_invariants());
}

TEST(SimClusterTest, NeverOverCommitsANode) {
  SimCluster cluster(two_nodes());
  int placed = 0;
  for (int i = 0; i < 20; ++i) placed += cluster.reserve("w" + std::to_string(i), {1000, 10, 0}, 1).is_ok();
  EXPECT_EQ(placed, 12);
  for (const auto& node : cluster.nodes()) EXPECT_TRUE(node.capacity.fits(node.peak_allocated));
  EXPECT_TRUE(cluster.check_invariants());
}

TEST(SimClusterTest, StartedWorkRunsForItsDurationThenFreesItsNodes) {
  SimCluster cluster(two_nodes());
  TimePoint t0 = from_millis(1000);
  ASSERT_TRUE(cluster.reserve("a", {4000, 10, 0}, 1).is_ok());
  ASSERT_TRUE(cluster.start("a", t0, Duration(500), 0).is_ok());
  auto events = cluster.drain_events(t0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, WorkloadEventKind::kStarted);
  EXPECT_TRUE(cluster.drain_events(t0 + Duration(499)).empty());
  events = cluster.drain_events(t0 + Duration(500));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, WorkloadEventKind::kSucceeded);
  EXPECT_EQ(cluster.capacity().free.cpu_milli, 12000);
}

TEST(SimClusterTest, RestoreRefusesWhatNoLongerFits) {
  SimCluster cluster(two_nodes());
  EXPECT_TRUE(cluster.restore("a", {4000, 10, 0}, {"n0"}).is_ok());
  EXPECT_FALSE(cluster.restore("b", {1000, 10, 0}, {"n0"}).is_ok());
  EXPECT_FALSE(cluster.restore("c", {1000, 10, 0}, {"gone"}).is_ok());
  EXPECT_TRUE(cluster.check_invariants());
}

}  // namespace
}  // namespace shoal::cluster
