// The local scheduler: the seed's three tables, quotas, gangs, selectors,
// node order, and properties under generated load.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>


#include "agent/cluster/fair_share.h"
#include "common/file.h"
#include "model/manifest.h"

namespace shoal::cluster {
namespace {

std::string slurp(const std::string& path) { return read_text_file(path).value_or(""); }

// Runs configs/examples/fairshare-<name> and returns queue -> namespace -> cpu (cores).
std::map<std::string, std::map<std::string, double>> run_example(const std::string& name) {
  std::string dir = std::string(SHOAL_SOURCE_DIR) + "/configs/examples/fairshare-" + name;
  auto cluster = model::parse_cluster(slurp(dir + "/cluster.yaml"));
  EXPECT_TRUE(cluster.is_ok()) << cluster.status().message();
  auto workloads = model::parse_workloads(slurp(dir + "/workloads.yaml"));
  EXPECT_TRUE(workloads.is_ok()) << workloads.status().message();
  auto scheduler = FairShareScheduler::create(*cluster);
  EXPECT_TRUE(scheduler.is_ok());
  std::vector<ScheduleRequest> requests;
  for (const auto& w : *workloads) requests.push_back({w.key(), w});
  std::map<std::string, std::map<std::string, double>> out;
  for (const auto& q : scheduler->allocate(requests).queues) {
    out[q.name];
    for (const auto& ns : q.namespaces) out[q.name][ns.name] = static_cast<double>(ns.allocated.cpu_milli) / 1000;
  }
  return out;
}

using Alloc = std::map<std::string, std::map<std::string, double>>;

TEST(FairShareTest, Table1EqualWeights) {
  EXPECT_EQ(run_example("table1"), (Alloc{{"q1", {{"ns1", 4}, {"ns2", 4}}}, {"q2", {{"ns3", 6}, {"ns4", 2}}}}));
}

TEST(FairShareTest, Table2QueueAndNamespaceWeights) {
  EXPECT_EQ(run_example("table2"), (Alloc{{"q1", {{"ns1", 3}, {"ns2", 1}}}, {"q2", {{"ns3", 10}, {"ns4", 2}}}}));
}

TEST(FairShareTest, Table3IdleQueueKeepsItsDeservedShareWithoutBorrowing) {
  EXPECT_EQ(run_example("table3"), (Alloc{{"q1", {}}, {"q2", {{"ns1", 3}, {"ns2", 9}}}}));
}

TEST(FairShareTest, Table3WithBorrowingGivesTheIdleShareAway) {
  Alloc got = run_example("table3-borrowing");
  EXPECT_EQ(got["q2"]["ns1"] + got["q2"]["ns2"], 16);
}

model::ClusterSpec cluster(int nodes, int64_t cpu_each) {
  model::ClusterSpec spec;
  spec.name = "c";
  for (int i = 0; i < nodes; ++i) spec.nodes.push_back({"n-" + std::to_string(i), {cpu_each, int64_t{64} << 30, 0}, {}});
  spec.queues = {{"default", 1}};
  return spec;
}

model::WorkloadSpec task(const std::string& ns, const std::string& name, int64_t cpu, int32_t replicas = 1) {
  model::WorkloadSpec w;
  w.namespace_name = ns;
  w.name = name;
  w.resources = {cpu, 1 << 20, 0};
  w.replicas = replicas;
  return w;
}

TEST(FairShareTest, QuotaRefusesTheWorkloadAndNamesTheLimit) {
  model::ClusterSpec spec = cluster(2, 8000);
  spec.resource_quotas = {{"a", {{"limits.cpu", "3"}, {"count/workloads", "5"}}}};
  auto scheduler = FairShareScheduler::create(spec);
  ASSERT_TRUE(scheduler.is_ok());
  auto result = scheduler->allocate({{"1", task("a", "one", 2000)}, {"2", task("a", "two", 2000)},
                                     {"3", task("b", "free", 2000)}});
  EXPECT_TRUE(result.workloads[0].admitted);
  EXPECT_FALSE(result.workloads[1].admitted);
  EXPECT_EQ(result.workloads[1].reason, "QuotaExceeded:cpu");
  EXPECT_TRUE(result.workloads[2].admitted) << "other namespaces are not limited";
}

TEST(FairShareTest, UnknownQuotaKeyIsRefusedWithTheField) {
  model::ClusterSpec spec = cluster(1, 8000);
  spec.resource_quotas = {{"a", {{"pods", "3"}}}};
  auto scheduler = FairShareScheduler::create(spec);
  ASSERT_FALSE(scheduler.is_ok());
  EXPECT_NE(scheduler.status().message().find("hard.pods"), std::string::npos);
}

TEST(FairShareTest, GangBindsOnlyWhenItsMinimumFitsAtOnce) {
  model::ClusterSpec spec = cluster(2, 4000);
  spec.borrowing = true;  // so only the nodes, not the queue's share, limit the gang
  auto scheduler = FairShareScheduler::create(spec);
  ASSERT_TRUE(scheduler.is_ok());
  model::WorkloadSpec big = task("a", "big", 4000, 3);  // needs 3 whole nodes; there are 2
  model::WorkloadSpec flexible = task("a", "flexible", 4000, 3);
  flexible.min_available = 2;
  auto result = scheduler->allocate({{"big", big}, {"flexible", flexible}});
  EXPECT_FALSE(result.workloads[0].admitted);
  EXPECT_EQ(result.workloads[0].reason, "GangDoesNotFit");
  EXPECT_TRUE(result.workloads[1].admitted);
  EXPECT_EQ(result.workloads[1].nodes.size(), 2u);
  EXPECT_EQ(result.workloads[1].reason, "NoNodeFits") << "its third task has no room";
  for (const auto& allocated : scheduler->node_allocated()) EXPECT_LE(allocated.cpu_milli, 4000);
}

TEST(FairShareTest, NodeSelectorAndNodeOrderChooseTheNode) {
  model::ClusterSpec spec = cluster(3, 8000);
  spec.nodes[2].labels["pool"] = "gpu";
  auto least = FairShareScheduler::create(spec);
  model::WorkloadSpec pinned = task("a", "pinned", 1000);
  pinned.node_selector = {{"pool", "gpu"}};
  auto result = least->allocate({{"1", task("a", "x", 1000)}, {"2", task("a", "y", 1000)}, {"3", pinned}});
  EXPECT_NE(result.workloads[0].nodes[0], result.workloads[1].nodes[0]) << "LeastAllocated spreads";
  EXPECT_EQ(result.workloads[2].nodes[0], "n-2");
  spec.node_order = model::NodeOrder::kMostAllocated;
  auto most = FairShareScheduler::create(spec);
  result = most->allocate({{"1", task("a", "x", 1000)}, {"2", task("a", "y", 1000)}});
  EXPECT_EQ(result.workloads[0].nodes[0], result.workloads[1].nodes[0]) << "MostAllocated packs";
}

TEST(FairShareTest, UnknownQueueIsNamed) {
  auto scheduler = FairShareScheduler::create(cluster(1, 8000));
  model::WorkloadSpec w = task("a", "x", 1000);
  w.queue = "gpu";
  EXPECT_EQ(scheduler->allocate({{"1", w}}).workloads[0].reason, "NoSuchQueue:gpu");
}

RC_GTEST_PROP(FairShareProperty, NeverOverCommitsNorExceedsAQuota, ()) {
  model::ClusterSpec spec = cluster(*rc::gen::inRange(1, 6), 4000);
  spec.queues = {{"q1", *rc::gen::inRange<int64_t>(1, 4)}, {"q2", *rc::gen::inRange<int64_t>(1, 4)}};
  int64_t quota_cpu = *rc::gen::inRange<int64_t>(1, 12) * 1000;
  spec.resource_quotas = {{"ns0", {{"cpu", model::format_cpu(quota_cpu)}}}};
  spec.borrowing = *rc::gen::arbitrary<bool>();
  auto scheduler = FairShareScheduler::create(spec);
  RC_ASSERT(scheduler.is_ok());
  std::vector<ScheduleRequest> requests;
  int count = *rc::gen::inRange(1, 40);
  for (int i = 0; i < count; ++i) {
    model::WorkloadSpec w = task("ns" + std::to_string(*rc::gen::inRange(0, 3)), "w" + std::to_string(i),
                                 *rc::gen::inRange<int64_t>(1, 5) * 500, *rc::gen::inRange(1, 3));
    w.queue = *rc::gen::element<std::string>("q1", "q2");
    requests.push_back({w.name, w});
  }
  ScheduleResult result = scheduler->allocate(requests);
  for (size_t n = 0; n < spec.nodes.size(); ++n) {
    RC_ASSERT(spec.nodes[n].capacity.fits(scheduler->node_allocated()[n]));
  }
  int64_t ns0 = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (result.workloads[i].admitted && requests[i].spec.namespace_name == "ns0") ns0 += requests[i].spec.total().cpu_milli;
  }
  RC_ASSERT(ns0 <= quota_cpu);
  if (!spec.borrowing) {
    for (const auto& q : result.queues) RC_ASSERT(q.deserved.fits(q.allocated));
  }
}

TEST(FairShareProperty, SharesConvergeToWeightsUnderContention) {
  // Two queues (1:3), each with two namespaces (1:2 and 1:4), many 100m tasks.
  model::ClusterSpec spec = cluster(10, 10000);
  spec.queues = {{"q1", 1}, {"q2", 3}};
  spec.resource_quotas = {{"a", {{"shoal.dev/namespace.weight", "1"}}}, {"b", {{"shoal.dev/namespace.weight", "2"}}},
                          {"c", {{"shoal.dev/namespace.weight", "1"}}}, {"d", {{"volcano.sh/namespace.weight", "4"}}}};
  auto scheduler = FairShareScheduler::create(spec);
  std::vector<ScheduleRequest> requests;
  int i = 0;
  for (const char* ns : {"a", "b", "c", "d"}) {
    for (int k = 0; k < 1000; ++k) {
      model::WorkloadSpec w = task(ns, std::string(ns) + std::to_string(k), 100);
      w.queue = (ns[0] == 'a' || ns[0] == 'b') ? "q1" : "q2";
      requests.push_back({std::to_string(i++), w});
    }
  }
  std::map<std::string, double> cpu;
  for (const auto& q : scheduler->allocate(requests).queues) {
    for (const auto& ns : q.namespaces) cpu[ns.name] = static_cast<double>(ns.allocated.cpu_milli);
  }
  double total = 100000;
  EXPECT_NEAR((cpu["a"] + cpu["b"]) / total, 0.25, 0.02);
  EXPECT_NEAR(cpu["b"] / (cpu["a"] + cpu["b"]), 2.0 / 3, 0.02);
  EXPECT_NEAR(cpu["d"] / (cpu["c"] + cpu["d"]), 4.0 / 5, 0.02);
}

}  // namespace
}  // namespace shoal::cluster
