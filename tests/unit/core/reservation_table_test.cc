// The target's reservation table on its own: what each source holds
// follows its records, the routing counts move with them, and its
// invariant catches a record changed without being followed.
#include "agent/core/target/reservation_table.h"

#include <gtest/gtest.h>

namespace shoal::core::target {
namespace {

store::ReservationRecord record(const std::string& source, const std::string& uid,
                                store::ReservationPhase phase, int64_t cpu_milli) {
  store::ReservationRecord out;
  out.source = source;
  out.uid = uid;
  out.phase = phase;
  out.spec.namespace_name = "default";
  out.spec.queue = "default";
  out.spec.name = uid;
  out.spec.replicas = 1;
  out.spec.resources = {cpu_milli, 0, 0};
  out.nodes = {"n1"};
  return out;
}

TEST(ReservationTableTest, WhatASourceHoldsFollowsItsRecords) {
  RoutingCounts counts;
  ReservationTable table(counts);
  table.file({"s1", "a"}, {record("s1", "a", store::ReservationPhase::kReserved, 1000)});
  table.file({"s1", "b"}, {record("s1", "b", store::ReservationPhase::kRunning, 2000)});
  table.file({"s2", "c"}, {record("s2", "c", store::ReservationPhase::kReserved, 500)});
  EXPECT_EQ(table.usage_of("s1").resources.cpu_milli, 3000);
  EXPECT_EQ(table.usage_of("s1").workloads, 2);
  EXPECT_TRUE(table.take_counts_moved());
  EXPECT_FALSE(table.take_counts_moved()) << "taken once";

  // Finished: it holds nothing any more.
  ReservationTable::Entry& b = *table.find({"s1", "b"});
  b.record.phase = store::ReservationPhase::kSucceeded;
  table.follow(b.record);
  EXPECT_EQ(table.usage_of("s1").resources.cpu_milli, 1000);
  table.erase({"s1", "a"});
  EXPECT_EQ(table.usage_of("s1").workloads, 0);
  EXPECT_EQ(table.usage_of("s2").resources.cpu_milli, 500);
  EXPECT_EQ(table.usage_of("nobody").workloads, 0);
  EXPECT_TRUE(table.any_of("s2", [](const store::ReservationRecord& r) { return r.uid == "c"; }));
  EXPECT_FALSE(table.any_of("s1", [](const store::ReservationRecord& r) { return r.uid == "a"; }));
  EXPECT_EQ(table.broken_invariant(), "");
}

TEST(ReservationTableTest, ARecordChangedWithoutBeingFollowedBreaksTheInvariant) {
  RoutingCounts counts;
  ReservationTable table(counts);
  const InvitationUsage& held = table.held_by("s1");
  table.file({"s1", "a"}, {record("s1", "a", store::ReservationPhase::kBound, 1000)});
  EXPECT_EQ(held.resources.cpu_milli, 1000) << "a row kept by reference sees the change";
  table.find({"s1", "a"})->record.phase = store::ReservationPhase::kFailed;
  EXPECT_NE(table.broken_invariant(), "");
  table.follow(table.find({"s1", "a"})->record);
  EXPECT_EQ(table.broken_invariant(), "");
  table.entries()[{"s2", "x"}] = {record("s1", "y", store::ReservationPhase::kReserved, 1)};
  EXPECT_NE(table.broken_invariant(), "") << "filed under another key";
}

}  // namespace
}  // namespace shoal::core::target
