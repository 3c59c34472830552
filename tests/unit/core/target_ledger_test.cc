// What the source knows of its targets, on its own: advertised room and
// facts, BOUND acknowledgements handed back by the next CAPACITY, and the
// counts of our work a target does not advertise yet.
#include "agent/core/source/target_ledger.h"

#include <gtest/gtest.h>

namespace shoal::core::source {
namespace {

protocol::Capacity capacity_of(const std::vector<std::string>& namespaces) {
  protocol::Capacity message;
  for (const auto& ns : namespaces) {
    protocol::NamespaceCapacity entry;
    entry.namespace_name = ns;
    message.namespaces.push_back(entry);
  }
  return message;
}

TEST(TargetLedgerTest, ACapacityReplacesWhatWasAdvertisedAndHandsBackWhatItNowCounts) {
  TargetLedger ledger;
  EXPECT_EQ(ledger.find("east"), nullptr);
  ledger.acknowledge("east", "u1");
  ledger.acknowledge("east", "u2");
  auto counted = ledger.advertised("east", capacity_of({"a", "b"}));
  EXPECT_EQ(counted, (std::vector<std::string>{"u1", "u2"}));
  EXPECT_TRUE(ledger.advertised("east", capacity_of({"a", "b"})).empty()) << "handed back once";
  EXPECT_EQ(ledger.capacity_of("east").size(), 2u);
  ledger.advertised("east", capacity_of({"c"}));
  ASSERT_EQ(ledger.capacity_of("east").size(), 1u);
  EXPECT_EQ(ledger.capacity_of("east")[0].namespace_name, "c");
  ledger.forget_capacity("east");
  EXPECT_TRUE(ledger.capacity_of("east").empty());
  EXPECT_EQ(ledger.broken_invariant(), "");
}

TEST(TargetLedgerTest, LabelsLeftOutOfACapacityStayAsLastSent) {
  TargetLedger ledger;
  protocol::Capacity first = capacity_of({"a"});
  first.cluster = protocol::ClusterFacts{};
  first.cluster->labels = model::Labels{{"zone", "z1"}};
  ledger.advertised("east", first);
  protocol::Capacity second = capacity_of({"a"});
  second.cluster = protocol::ClusterFacts{};  // no labels: unchanged
  ledger.advertised("east", second);
  const TargetLedger::Target* east = ledger.find("east");
  ASSERT_NE(east, nullptr);
  EXPECT_TRUE(east->heard_facts);
  ASSERT_TRUE(east->facts.labels.has_value());
  EXPECT_EQ(east->facts.labels->at("zone"), "z1");
}

TEST(TargetLedgerTest, WorkHeadedThereCountsUntilItIsNoLongerExpected) {
  TargetLedger ledger;
  model::WorkloadSpec spec;
  spec.namespace_name = "default";
  spec.queue = "q";
  spec.resources = {2000, 1 << 20, 0};
  ledger.expect("east", spec, 1);
  ledger.count_ours("east", 1);
  const TargetLedger::Target& east = *ledger.find("east");
  EXPECT_EQ(east.unadvertised.workloads, 1);
  EXPECT_EQ(east.unadvertised_room.cpu_milli, 2000);
  EXPECT_EQ((east.unadvertised_by_queue.at({"default", "q"})), 1);
  EXPECT_EQ(east.ours, 1);
  ledger.expect("east", spec, -1);
  EXPECT_EQ(east.unadvertised.workloads, 0);
  EXPECT_EQ(east.unadvertised_room, model::Resources{});
  EXPECT_EQ(ledger.broken_invariant(), "");
  ledger.count_ours("east", -2);
  EXPECT_NE(ledger.broken_invariant(), "") << "fewer than none";
}

TEST(TargetLedgerTest, ALeaseRenewalIsRememberedPerTarget) {
  TargetLedger ledger;
  EXPECT_EQ(ledger.last_digest_sent("east"), TimePoint{});
  TimePoint at = TimePoint{} + std::chrono::seconds(5);
  ledger.digest_sent("east", at);
  EXPECT_EQ(ledger.last_digest_sent("east"), at);
  EXPECT_EQ(ledger.last_digest_sent("west"), TimePoint{});
}

}  // namespace
}  // namespace shoal::core::source
