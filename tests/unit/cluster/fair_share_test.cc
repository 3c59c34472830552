// The local scheduler: the seed's three tables, quotas, gangs, selectors,
// node order, and properties under generated load.
#include <map>
#include <set>
#include <tuple>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "agent/cluster/fair_share.h"
#include "common/file.h"
#include "reference_scheduler.h"
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

// The agent's queue at scale: with the cluster full, a pass over 10,000
// alike workloads and one of another kind tries two (one per kind), and
// when room frees it tries what it admits plus one per kind.
TEST(ScheduleQueueTest, APassTriesOncePerKindOfWorkNotOncePerWorkload) {
  auto scheduler = FairShareScheduler::create(cluster(2, 4000));
  ASSERT_TRUE(scheduler.is_ok());
  ScheduleQueue queue;
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(queue.push("w" + std::to_string(i), task("a", "w", 1000)));
  ASSERT_TRUE(queue.push("big", task("b", "big", 5000)));  // larger than any node
  ASSERT_FALSE(queue.push("w7", task("a", "w", 1000))) << "a queued key keeps its place";
  std::vector<FairShareScheduler::Served> first = scheduler->serve(queue, /*whole=*/true);
  ASSERT_EQ(first.size(), 8u) << "8 one-cpu workloads fill two 4-cpu nodes";
  EXPECT_EQ(first.front().key, "w0") << "oldest first";
  uint64_t before = queue.tries();
  EXPECT_TRUE(scheduler->serve(queue, /*whole=*/true).empty());
  EXPECT_EQ(queue.tries() - before, 2u);
  // The queue's whole share is in use (no borrowing): that is the reason.
  EXPECT_EQ(queue.reason("w9999"), "QueueDeservedShareReached:default");
  EXPECT_EQ(queue.reason("big"), "QueueDeservedShareReached:default");
  scheduler->release(first[0].spec, first[0].nodes);
  before = queue.tries();
  std::vector<FairShareScheduler::Served> next = scheduler->serve(queue, /*whole=*/true);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next.front().key, "w8");
  EXPECT_EQ(queue.tries() - before, 3u) << "the one admitted, then one refusal per kind";
  EXPECT_EQ(queue.size(), 10000u - 9u + 1u);
  EXPECT_TRUE(queue.erase("w9"));
  EXPECT_FALSE(queue.erase("w9"));
  EXPECT_TRUE(queue.check_invariants());
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

// A random cluster and workloads of a few shapes (so alike work forms
// groups), with quotas, weights, gangs, priorities, selectors and an
// unknown queue: what the grouped pass must decide exactly as the
// one-by-one pass did.
struct Scenario {
  model::ClusterSpec spec;
  std::map<std::string, NamespaceQuota> quotas;
  std::map<std::string, int64_t> weights;
};

Scenario random_scenario() {
  Scenario s;
  s.spec = cluster(*rc::gen::inRange(1, 6), 4000);
  for (auto& node : s.spec.nodes) {
    if (*rc::gen::arbitrary<bool>()) node.labels["pool"] = *rc::gen::element<std::string>("a", "b");
  }
  s.spec.queues = {{"q1", *rc::gen::inRange<int64_t>(1, 4)}, {"q2", *rc::gen::inRange<int64_t>(1, 4)}};
  s.spec.borrowing = *rc::gen::arbitrary<bool>();
  if (*rc::gen::arbitrary<bool>()) s.spec.node_order = model::NodeOrder::kMostAllocated;
  int64_t quota_cpu = *rc::gen::inRange<int64_t>(1, 12) * 1000;
  int64_t quota_count = *rc::gen::inRange<int64_t>(1, 6);
  s.spec.resource_quotas = {{"ns0", {{"cpu", model::format_cpu(quota_cpu)}}},
                            {"ns1", {{"count/workloads", std::to_string(quota_count)}}},
                            {"ns2", {{"shoal.dev/namespace.weight", "2"}}}};
  s.quotas["ns0"].cpu_milli = quota_cpu;
  s.quotas["ns1"].workloads = quota_count;
  s.weights["ns2"] = 2;
  return s;
}

model::WorkloadSpec random_workload(const std::string& name) {
  model::WorkloadSpec w = task("ns" + std::to_string(*rc::gen::inRange(0, 4)), name,
                               *rc::gen::element<int64_t>(500, 1000, 2000),
                               *rc::gen::inRange(1, 4));
  w.min_available = *rc::gen::inRange(0, w.replicas + 1);
  w.priority = *rc::gen::inRange(0, 3);
  w.queue = *rc::gen::element<std::string>("q1", "q2", "q2", "none");
  if (*rc::gen::inRange(0, 4) == 0) w.node_selector = {{"pool", "a"}};
  return w;
}

// Alike work (schedule_queue.h): the grouped pass gives every waiting
// member of a group the reason its first refused member got, while the
// one-by-one pass may name another reason that also holds for a later
// member (a queue's share reached where the first met its quota). So a
// waiting workload's reason must be one the one-by-one pass gave its group.
using Shape = std::tuple<std::string, std::string, int64_t, int32_t, int32_t, model::Labels>;
Shape shape_of(const model::WorkloadSpec& w) {
  return {w.queue, w.namespace_name, w.resources.cpu_milli, w.replicas, w.min_available,
          w.node_selector};
}
std::map<Shape, std::set<std::string>> reasons_by_shape(const std::vector<ScheduleRequest>& requests,
                                                        const ScheduleResult& result) {
  std::map<Shape, std::set<std::string>> out;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!result.workloads[i].admitted) out[shape_of(requests[i].spec)].insert(result.workloads[i].reason);
  }
  return out;
}

RC_GTEST_PROP(FairShareProperty, TheGroupedPassDecidesAsTheOneByOnePass, ()) {
  Scenario s = random_scenario();
  auto scheduler = FairShareScheduler::create(s.spec);
  RC_ASSERT(scheduler.is_ok());
  reference::ReferenceScheduler oracle(s.spec, s.quotas, s.weights);
  // Two passes: the second starts from what the first left allocated.
  for (int round = 0; round < 2; ++round) {
    std::vector<ScheduleRequest> requests;
    int count = *rc::gen::inRange(1, 40);
    for (int i = 0; i < count; ++i) {
      std::string name = "r" + std::to_string(round) + "w" + std::to_string(i);
      requests.push_back({name, random_workload(name)});
    }
    ScheduleResult got = scheduler->allocate(requests);
    ScheduleResult want = oracle.allocate(requests);
    auto reasons = reasons_by_shape(requests, want);
    for (size_t i = 0; i < requests.size(); ++i) {
      RC_ASSERT(got.workloads[i].key == want.workloads[i].key);
      RC_ASSERT(got.workloads[i].admitted == want.workloads[i].admitted);
      RC_ASSERT(got.workloads[i].nodes == want.workloads[i].nodes);
      if (want.workloads[i].admitted) {
        RC_ASSERT(got.workloads[i].reason == want.workloads[i].reason);
      } else {
        RC_ASSERT(reasons[shape_of(requests[i].spec)].contains(got.workloads[i].reason));
      }
    }
    RC_ASSERT(got.queues.size() == want.queues.size());
    for (size_t q = 0; q < got.queues.size(); ++q) {
      RC_ASSERT(got.queues[q].allocated == want.queues[q].allocated);
      RC_ASSERT(got.queues[q].namespaces.size() == want.queues[q].namespaces.size());
      for (size_t n = 0; n < got.queues[q].namespaces.size(); ++n) {
        RC_ASSERT(got.queues[q].namespaces[n].name == want.queues[q].namespaces[n].name);
        RC_ASSERT(got.queues[q].namespaces[n].allocated == want.queues[q].namespaces[n].allocated);
      }
    }
    RC_ASSERT(scheduler->node_allocated() == oracle.node_allocated());
  }
}

// The agent's way: a queue kept across passes, work arriving, leaving and
// finishing in between, whole reservations only. Each pass must admit what
// one one-by-one pass over the queue (in arrival order) would, and leave
// every waiting workload with that pass's reason.
RC_GTEST_PROP(FairShareProperty, AQueueServedPassByPassDecidesAsTheOneByOnePass, ()) {
  Scenario s = random_scenario();
  auto scheduler = FairShareScheduler::create(s.spec);
  RC_ASSERT(scheduler.is_ok());
  reference::ReferenceScheduler oracle(s.spec, s.quotas, s.weights);
  std::map<std::string, size_t> node_index;
  for (size_t n = 0; n < s.spec.nodes.size(); ++n) node_index[s.spec.nodes[n].name] = n;
  ScheduleQueue queue;
  std::vector<std::pair<std::string, model::WorkloadSpec>> waiting;  // arrival order
  std::map<std::string, std::pair<model::WorkloadSpec, std::vector<std::string>>> held;
  int next = 0;
  int steps = *rc::gen::inRange(1, 8);
  for (int step = 0; step < steps; ++step) {
    for (int i = *rc::gen::inRange(0, 12); i > 0; --i) {
      std::string key = "w" + std::to_string(next++);
      model::WorkloadSpec w = random_workload(key);
      RC_ASSERT(queue.push(key, w));
      waiting.emplace_back(key, w);
    }
    if (!waiting.empty() && *rc::gen::arbitrary<bool>()) {  // a source withdraws one
      size_t gone = *rc::gen::inRange<size_t>(0, waiting.size());
      RC_ASSERT(queue.erase(waiting[gone].first));
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(gone));
    }
    if (!held.empty() && *rc::gen::arbitrary<bool>()) {  // one finishes
      auto done = held.begin();
      std::vector<size_t> indexes;
      for (const auto& name : done->second.second) indexes.push_back(node_index[name]);
      scheduler->release(done->second.first, done->second.second);
      oracle.release(done->second.first, indexes);
      held.erase(done);
    }
    std::vector<ScheduleRequest> requests;
    for (auto [key, w] : waiting) {
      w.min_available = 0;  // a reservation holds every replica
      requests.push_back({key, w});
    }
    ScheduleResult want = oracle.allocate(requests);
    std::vector<FairShareScheduler::Served> served = scheduler->serve(queue, /*whole=*/true);
    std::map<std::string, std::vector<std::string>> admitted;
    for (const auto& one : served) admitted[one.key] = one.nodes;
    auto reasons = reasons_by_shape(requests, want);
    std::vector<std::pair<std::string, model::WorkloadSpec>> still;
    for (size_t i = 0; i < waiting.size(); ++i) {
      const WorkloadDecision& decision = want.workloads[i];
      const std::string& key = waiting[i].first;
      RC_ASSERT(admitted.contains(key) == decision.admitted);
      if (decision.admitted) {
        RC_ASSERT(admitted[key] == decision.nodes);
        RC_ASSERT(!queue.contains(key));
        held[key] = {waiting[i].second, decision.nodes};
      } else {
        RC_ASSERT(queue.contains(key));
        RC_ASSERT(reasons[shape_of(requests[i].spec)].contains(std::string(queue.reason(key))));
        still.push_back(waiting[i]);
      }
    }
    waiting = std::move(still);
    RC_ASSERT(queue.size() == waiting.size());
    RC_ASSERT(queue.check_invariants());
    RC_ASSERT(scheduler->node_allocated() == oracle.node_allocated());
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
