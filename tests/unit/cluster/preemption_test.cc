// Preemption in the local scheduler: which running work a waiting workload
// may stop (FairShareScheduler::plan_preemption), and how NodeCluster hands
// the victims' room over and holds the preemptor back until they are gone.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/cluster/fair_share.h"
#include "agent/cluster/node_cluster.h"

namespace shoal::cluster {
namespace {

model::ClusterSpec cluster_of(int nodes, int64_t cpu_each, model::PreemptionSpec preemption) {
  model::ClusterSpec spec;
  spec.name = "c";
  for (int i = 0; i < nodes; ++i) {
    spec.nodes.push_back({"n" + std::to_string(i), {cpu_each, int64_t{64} << 30, 0}, {}});
  }
  spec.queues = {{"default", 1}};
  spec.preemption = preemption;
  return spec;
}

constexpr model::PreemptionSpec kWithinQueue{model::PreemptionSpec::WithinQueue::kLowerPriority,
                                             model::PreemptionSpec::Reclaim::kNever};

model::WorkloadSpec work(const std::string& name, int64_t cpu, int32_t priority, int32_t replicas = 1,
                         const std::string& queue = "default") {
  model::WorkloadSpec spec;
  spec.name = name;
  spec.queue = queue;
  spec.priority = priority;
  spec.resources = {cpu, 1 << 20, 0};
  spec.replicas = replicas;
  return spec;
}

// Running work for the planner, held through the scheduler as a cluster would.
class Holdings {
 public:
  explicit Holdings(FairShareScheduler& scheduler) : scheduler_(scheduler) {}
  void hold(const std::string& key, model::WorkloadSpec spec, std::vector<std::string> nodes) {
    ASSERT_TRUE(scheduler_.restore(spec, nodes).is_ok()) << key;
    specs_[key] = std::move(spec);
    running_.push_back({key, nullptr, std::move(nodes), ++started_});
  }
  std::vector<RunningWork> running() const {
    std::vector<RunningWork> out = running_;
    for (RunningWork& work : out) work.spec = &specs_.at(work.key);
    return out;
  }

 private:
  FairShareScheduler& scheduler_;
  std::map<std::string, model::WorkloadSpec> specs_;
  std::vector<RunningWork> running_;
  uint64_t started_ = 0;
};

bool anyone(const RunningWork&) { return true; }

std::set<std::string> victims_of(const std::optional<PreemptionPlan>& plan) {
  return plan ? std::set<std::string>(plan->victims.begin(), plan->victims.end()) : std::set<std::string>{};
}

// Two 4-cpu nodes, full: a and b (priority 0) on n0, c (1) and d (0, the
// last started) on n1.
void fill_two_nodes(Holdings& held) {
  held.hold("a", work("a", 2000, 0), {"n0"});
  held.hold("b", work("b", 2000, 0), {"n0"});
  held.hold("c", work("c", 2000, 1), {"n1"});
  held.hold("d", work("d", 2000, 0), {"n1"});
}

TEST(PreemptionPlanTest, StopsTheLowestPriorityMostRecentlyStartedFirst) {
  auto scheduler = FairShareScheduler::create(cluster_of(2, 4000, kWithinQueue));
  ASSERT_TRUE(scheduler.is_ok());
  Holdings held(*scheduler);
  fill_two_nodes(held);
  auto plan = scheduler->plan_preemption(work("urgent", 2000, 5), held.running(), anyone);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->victims, std::vector<std::string>{"d"}) << "priority 0, started last";
  EXPECT_EQ(plan->nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(plan->highest_priority, 0);
}

TEST(PreemptionPlanTest, SparesVictimsThatTurnOutNotToBeNeeded) {
  auto scheduler = FairShareScheduler::create(cluster_of(2, 4000, kWithinQueue));
  ASSERT_TRUE(scheduler.is_ok());
  Holdings held(*scheduler);
  fill_two_nodes(held);
  // 4 cpu on one node: d, b and a are taken in turn until n0 is empty;
  // then d is spared, since n0 alone makes room.
  auto plan = scheduler->plan_preemption(work("big", 4000, 5), held.running(), anyone);
  EXPECT_EQ(victims_of(plan), (std::set<std::string>{"a", "b"}));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->nodes, std::vector<std::string>{"n0"});
}

TEST(PreemptionPlanTest, NothingIsStoppedWhenPreemptionIsOffOrNotAllowed) {
  // Off unless the cluster says.
  auto off = FairShareScheduler::create(cluster_of(1, 4000, {}));
  ASSERT_TRUE(off.is_ok());
  Holdings held_off(*off);
  held_off.hold("low", work("low", 4000, 0), {"n0"});
  EXPECT_FALSE(off->plan_preemption(work("urgent", 4000, 9), held_off.running(), anyone));

  auto on = FairShareScheduler::create(cluster_of(1, 4000, kWithinQueue));
  ASSERT_TRUE(on.is_ok());
  Holdings held(*on);
  held.hold("low", work("low", 4000, 3), {"n0"});
  // Not of equal or lower priority.
  EXPECT_FALSE(on->plan_preemption(work("same", 4000, 3), held.running(), anyone));
  EXPECT_FALSE(on->plan_preemption(work("lower", 4000, 1), held.running(), anyone));
  // Not a workload that says Never.
  model::WorkloadSpec polite = work("polite", 4000, 9);
  polite.preemption_policy = model::PreemptionPolicy::kNever;
  EXPECT_FALSE(on->plan_preemption(polite, held.running(), anyone));
  // Not work the caller may not stop (another organization's, say).
  EXPECT_FALSE(on->plan_preemption(work("urgent", 4000, 9), held.running(),
                                   [](const RunningWork& w) { return w.key != "low"; }));
  // Not when even stopping everything would not make room.
  EXPECT_FALSE(on->plan_preemption(work("huge", 8000, 9), held.running(), anyone));
  EXPECT_EQ(victims_of(on->plan_preemption(work("urgent", 4000, 9), held.running(), anyone)),
            std::set<std::string>{"low"});
}

TEST(PreemptionPlanTest, AGangIsStoppedWhole) {
  auto scheduler = FairShareScheduler::create(cluster_of(2, 4000, kWithinQueue));
  ASSERT_TRUE(scheduler.is_ok());
  Holdings held(*scheduler);
  model::WorkloadSpec gang = work("gang", 4000, 0, 2);
  gang.min_available = 2;
  held.hold("gang", gang, {"n0", "n1"});
  auto plan = scheduler->plan_preemption(work("urgent", 2000, 5), held.running(), anyone);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->victims, std::vector<std::string>{"gang"}) << "one victim: both its replicas go";
}

TEST(PreemptionPlanTest, ReclaimTakesBackOnlyWhatBorrowingQueuesHoldAboveTheirShare) {
  auto spec_with = [](model::PreemptionSpec::Reclaim reclaim) {
    model::ClusterSpec spec = cluster_of(2, 4000, {model::PreemptionSpec::WithinQueue::kNever, reclaim});
    spec.queues = {{"q1", 1}, {"q2", 1}};
    spec.borrowing = true;
    return spec;
  };
  // q2 borrowed all 8 cpu with high-priority work; q1 deserves 4.
  auto fill = [](Holdings& held, int count) {
    for (int i = 0; i < count; ++i) {
      std::string key = "q2-" + std::to_string(i);
      held.hold(key, work(key, 2000, 10, 1, "q2"), {i % 2 ? "n1" : "n0"});
    }
  };
  auto any = FairShareScheduler::create(spec_with(model::PreemptionSpec::Reclaim::kAny));
  ASSERT_TRUE(any.is_ok());
  Holdings borrowed(*any);
  fill(borrowed, 4);
  auto plan = any->plan_preemption(work("mine", 2000, 0, 1, "q1"), borrowed.running(), anyone);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->victims.size(), 1u);
  EXPECT_EQ(plan->highest_priority, 10);
  // Beyond q1's deserved share, nothing is reclaimed.
  EXPECT_FALSE(any->plan_preemption(work("greedy", 6000, 0, 1, "q1"), borrowed.running(), anyone));

  auto lower = FairShareScheduler::create(spec_with(model::PreemptionSpec::Reclaim::kLowerPriority));
  ASSERT_TRUE(lower.is_ok());
  Holdings high(*lower);
  fill(high, 4);
  EXPECT_FALSE(lower->plan_preemption(work("mine", 2000, 0, 1, "q1"), high.running(), anyone))
      << "LowerPriority reclaims only work below the preemptor's priority";

  // A queue within its deserved share gives nothing back.
  auto within = FairShareScheduler::create(spec_with(model::PreemptionSpec::Reclaim::kAny));
  ASSERT_TRUE(within.is_ok());
  Holdings fair(*within);
  fill(fair, 2);
  fair.hold("q1-own", work("q1-own", 2000, 0, 2, "q1"), {"n0", "n1"});
  EXPECT_FALSE(within->plan_preemption(work("more", 2000, 0, 1, "q1"), fair.running(), anyone));
}

// A runner whose stops take as long as the test says: stop() leaves work
// stopping until finish_stop() reports it gone.
class SlowStopRunner final : public Runner {
 public:
  Status launch(const LaunchRequest& request) override {
    launched.push_back(request.key);
    return Status::ok();
  }
  bool stop(const std::string& key, Duration grace) override {
    stopping[key] = grace;
    return false;
  }
  std::vector<WorkloadEvent> observe(TimePoint now) override {
    std::vector<WorkloadEvent> out;
    for (const std::string& key : gone) out.push_back({key, WorkloadEventKind::kStopped, now, 0, ""});
    gone.clear();
    return out;
  }
  void finish_stop(const std::string& key) {
    stopping.erase(key);
    gone.push_back(key);
  }
  TimePoint next_event_at() const override { return gone.empty() ? TimePoint::max() : TimePoint::min(); }
  void forget(const std::string&) override {}
  std::string describe(const std::string&) const override { return ""; }
  Result<LogChunk> read_log(const std::string&, int, int64_t, size_t) const override {
    return not_found("no logs");
  }

  std::vector<std::string> launched;
  std::map<std::string, Duration> stopping;
  std::vector<std::string> gone;
};

struct SlowCluster {
  SlowStopRunner* runner;
  std::unique_ptr<NodeCluster> cluster;
};

SlowCluster slow_cluster(model::ClusterSpec spec) {
  auto runner = std::make_unique<SlowStopRunner>();
  SlowStopRunner* raw = runner.get();
  auto made = NodeCluster::create(std::move(spec), std::move(runner));
  EXPECT_TRUE(made.is_ok());
  return {raw, std::move(made).value()};
}

void reserve_and_launch(NodeCluster& cluster, const std::string& key, const model::WorkloadSpec& spec) {
  auto nodes = cluster.reserve(key, spec);
  ASSERT_TRUE(nodes.is_ok()) << key << ": " << nodes.status().message();
  ASSERT_TRUE(cluster.launch({key, key, 1, "src", spec, *nodes, from_millis(0)}).is_ok());
}

const auto kAnyone = [](const std::string&) { return true; };

std::vector<std::string> keys_of(const std::vector<WorkloadEvent>& events, WorkloadEventKind kind) {
  std::vector<std::string> out;
  for (const WorkloadEvent& event : events) {
    if (event.kind == kind) out.push_back(event.key);
  }
  return out;
}

TEST(NodeClusterPreemptionTest, TheVictimsRoomPassesAtOnceAndThePreemptorStartsOnceTheyAreGone) {
  auto [runner, cluster] = slow_cluster(cluster_of(1, 4000, kWithinQueue));
  model::WorkloadSpec low = work("low", 2000, 0);
  low.termination_grace = std::chrono::seconds(7);
  reserve_and_launch(*cluster, "s/low-1", low);
  reserve_and_launch(*cluster, "s/low-2", low);
  cluster->observe(from_millis(1));  // their starts

  model::WorkloadSpec urgent = work("urgent", 2000, 5);
  auto cost = cluster->preemption_cost(urgent, kAnyone);
  ASSERT_TRUE(cost);
  EXPECT_EQ(cost->victims, 1);
  EXPECT_EQ(cost->highest_priority, 0);
  EXPECT_TRUE(cluster->check_invariants());
  EXPECT_TRUE(runner->stopping.empty()) << "asking the cost stops nothing";

  auto done = cluster->preempt("t/urgent", urgent, kAnyone, from_millis(2));
  ASSERT_TRUE(done.is_ok()) << done.status().message();
  EXPECT_EQ(done->victims, std::vector<std::string>{"s/low-2"});
  EXPECT_EQ(runner->stopping.at("s/low-2"), std::chrono::seconds(7)) << "its own grace period";
  EXPECT_TRUE(cluster->check_invariants());
  // The room is the preemptor's: nothing else may take it meanwhile.
  EXPECT_FALSE(cluster->reserve("s/other", work("other", 1000, 0)).is_ok());

  // Bound and launched by the core, it waits for its victim.
  ASSERT_TRUE(cluster->launch({"t/urgent", "urgent", 1, "t", urgent, done->nodes, from_millis(2)}).is_ok());
  EXPECT_EQ(runner->launched, (std::vector<std::string>{"s/low-1", "s/low-2"}));
  std::vector<WorkloadEvent> events = cluster->observe(from_millis(3));
  EXPECT_TRUE(keys_of(events, WorkloadEventKind::kFailed).empty()) << "the victim still stops";
  EXPECT_TRUE(keys_of(events, WorkloadEventKind::kStarted).empty());

  runner->finish_stop("s/low-2");
  events = cluster->observe(from_millis(4));
  ASSERT_EQ(keys_of(events, WorkloadEventKind::kFailed), std::vector<std::string>{"s/low-2"});
  for (const WorkloadEvent& event : events) {
    if (event.kind == WorkloadEventKind::kFailed) {
      EXPECT_EQ(event.cause, EndCause::kPreempted);
    }
  }
  EXPECT_EQ(runner->launched.back(), "t/urgent") << "launched once its victim was gone";
  EXPECT_EQ(keys_of(events, WorkloadEventKind::kStarted), std::vector<std::string>{"t/urgent"});
  EXPECT_TRUE(cluster->check_invariants());
  for (const NodeUsage& node : cluster->nodes()) EXPECT_TRUE(node.capacity.fits(node.peak_allocated));
}

TEST(NodeClusterPreemptionTest, APreemptorGivenUpKeepsItsRoomUntilItsVictimsAreGone) {
  auto [runner, cluster] = slow_cluster(cluster_of(1, 4000, kWithinQueue));
  reserve_and_launch(*cluster, "s/low", work("low", 4000, 0));
  auto done = cluster->preempt("t/urgent", work("urgent", 4000, 5), kAnyone, from_millis(2));
  ASSERT_TRUE(done.is_ok());
  cluster->release("t/urgent");  // its source cancelled it
  EXPECT_TRUE(cluster->check_invariants());
  EXPECT_FALSE(cluster->reserve("s/next", work("next", 1000, 0)).is_ok())
      << "the victim still runs: its room is not free yet";
  runner->finish_stop("s/low");
  std::vector<WorkloadEvent> events = cluster->observe(from_millis(5));
  EXPECT_EQ(keys_of(events, WorkloadEventKind::kFailed), std::vector<std::string>{"s/low"});
  EXPECT_TRUE(cluster->check_invariants());
  EXPECT_TRUE(cluster->reserve("s/next", work("next", 4000, 0)).is_ok());
  EXPECT_EQ(runner->launched, std::vector<std::string>{"s/low"}) << "the preemptor never ran";
}

// After a restart, a victim that was still stopping holds its room again
// until it is gone: the preemptor, restored after it, cannot take the room
// (and so can never start beside it); the victim is stopped again with its
// own grace and reported Preempted once gone.
TEST(NodeClusterPreemptionTest, AVictimStillStoppingAfterARestartKeepsItsRoomUntilItIsGone) {
  auto [runner, cluster] = slow_cluster(cluster_of(1, 4000, kWithinQueue));
  model::WorkloadSpec low = work("low", 4000, 0);
  low.termination_grace = std::chrono::seconds(9);
  ASSERT_TRUE(cluster->restore_preempted("s/low", low, {"n0"}, from_millis(1)).is_ok());
  EXPECT_EQ(runner->stopping.at("s/low"), std::chrono::seconds(9)) << "stopped again, with its own grace";
  EXPECT_TRUE(runner->launched.empty()) << "never launched again";
  EXPECT_TRUE(cluster->check_invariants());
  EXPECT_FALSE(cluster
                   ->restore("t/urgent", work("urgent", 4000, 5), {"n0"},
                             Cluster::Restored::kLaunched)
                   .is_ok())
      << "its room is held while it stops: its preemptor, launched before, waits";
  EXPECT_TRUE(keys_of(cluster->observe(from_millis(2)), WorkloadEventKind::kFailed).empty());

  runner->finish_stop("s/low");
  std::vector<WorkloadEvent> events = cluster->observe(from_millis(3));
  ASSERT_EQ(keys_of(events, WorkloadEventKind::kFailed), std::vector<std::string>{"s/low"});
  for (const WorkloadEvent& event : events) {
    if (event.kind == WorkloadEventKind::kFailed) {
      EXPECT_EQ(event.cause, EndCause::kPreempted);
    }
  }
  EXPECT_TRUE(cluster->check_invariants());
  EXPECT_TRUE(cluster->reserve("t/urgent", work("urgent", 4000, 5)).is_ok()) << "free once it is gone";
}

TEST(NodeClusterPreemptionTest, OnlyLaunchedWorkIsEverAVictim) {
  auto [runner, cluster] = slow_cluster(cluster_of(1, 4000, kWithinQueue));
  ASSERT_TRUE(cluster->reserve("s/held", work("held", 4000, 0)).is_ok());  // not launched yet
  EXPECT_FALSE(cluster->preemption_cost(work("urgent", 4000, 5), kAnyone));
  EXPECT_FALSE(cluster->preempt("t/urgent", work("urgent", 4000, 5), kAnyone, from_millis(2)).is_ok());
  EXPECT_TRUE(runner->stopping.empty());
}

TEST(NodeClusterPreemptionTest, OnTheSimBackendTheVictimEndsAtOnce) {
  auto made = make_sim_cluster(cluster_of(1, 4000, kWithinQueue));
  ASSERT_TRUE(made.is_ok());
  NodeCluster& sim = **made;
  model::WorkloadSpec low = work("low", 4000, 0);
  low.sim.duration = std::chrono::hours(1);
  reserve_and_launch(sim, "s/low", low);
  sim.observe(from_millis(1));
  auto done = sim.preempt("t/urgent", work("urgent", 4000, 5), kAnyone, from_millis(2));
  ASSERT_TRUE(done.is_ok());
  EXPECT_EQ(sim.next_event_at(), TimePoint::min()) << "the victim's end is due now";
  model::WorkloadSpec urgent = work("urgent", 4000, 5);
  ASSERT_TRUE(sim.launch({"t/urgent", "urgent", 1, "t", urgent, done->nodes, from_millis(2)}).is_ok());
  std::vector<WorkloadEvent> events = sim.observe(from_millis(2));
  EXPECT_EQ(keys_of(events, WorkloadEventKind::kFailed), std::vector<std::string>{"s/low"});
  EXPECT_EQ(keys_of(events, WorkloadEventKind::kStarted), std::vector<std::string>{"t/urgent"});
  EXPECT_TRUE(sim.check_invariants());
}

}  // namespace
}  // namespace shoal::cluster
