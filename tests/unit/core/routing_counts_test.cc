// A target's routing counts on their own: bound or running copies and
// queued candidates, per namespace, per queue and cluster-wide.
#include "agent/core/target/routing_counts.h"

#include <gtest/gtest.h>

namespace shoal::core::target {
namespace {

store::ReservationRecord reservation(const std::string& uid, store::ReservationPhase phase) {
  store::ReservationRecord record;
  record.source = "src";
  record.uid = uid;
  record.phase = phase;
  record.spec.namespace_name = "team";
  record.spec.queue = "q";
  record.spec.resources = {1000, 1 << 20, 0};
  return record;
}

TEST(RoutingCountsTest, ACopyCountsWhileBoundOrRunningAndStopsWhenItEnds) {
  RoutingCounts counts;
  EXPECT_FALSE(counts.follow(reservation("u1", store::ReservationPhase::kReserved)))
      << "a reservation is not a workload yet";
  EXPECT_TRUE(counts.follow(reservation("u1", store::ReservationPhase::kBound)));
  EXPECT_FALSE(counts.follow(reservation("u1", store::ReservationPhase::kRunning))) << "counted once";
  EXPECT_EQ(counts.cluster().workloads, 1);
  EXPECT_EQ(counts.by_namespace().at("team").cpu_milli, 1000);
  EXPECT_EQ(counts.in_queue("team", "q"), 1);
  uint64_t version = counts.version();
  EXPECT_TRUE(counts.follow(reservation("u1", store::ReservationPhase::kSucceeded)));
  EXPECT_GT(counts.version(), version);
  EXPECT_EQ(counts.cluster().workloads, 0);
  EXPECT_EQ(counts.broken_invariant(), "");
  EXPECT_FALSE(counts.forget({"src", "u1"})) << "no longer counted";
}

TEST(RoutingCountsTest, QueuedCandidatesCountInTheirQueueAndTheDepths) {
  RoutingCounts counts;
  counts.queued("team", "q", 1);
  counts.queued("team", "q", 1);
  counts.follow(reservation("u1", store::ReservationPhase::kRunning));
  EXPECT_EQ(counts.cluster().queued, 2);
  EXPECT_EQ(counts.queues_of("team"), (std::map<std::string, int64_t>{{"q", 3}}));
  EXPECT_EQ(counts.queue_depths(), (std::map<RoutingCounts::Key, int64_t>{{{"team", "q"}, 2}}));
  counts.queued("team", "q", -2);
  EXPECT_TRUE(counts.queue_depths().empty());
  EXPECT_EQ(counts.broken_invariant(), "");
  EXPECT_TRUE(counts.forget({"src", "u1"}));
  counts.queued("team", "q", -1);
  EXPECT_NE(counts.broken_invariant(), "") << "fewer than none queued";
}

}  // namespace
}  // namespace shoal::core::target
