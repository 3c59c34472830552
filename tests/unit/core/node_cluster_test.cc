#include <gtest/gtest.h>

#include "agent/cluster/node_cluster.h"

#include <map>
#include <memory>

namespace shoal::cluster {
namespace {

model::ClusterSpec two_nodes() {
  model::ClusterSpec spec;
  spec.name = "x";
  spec.nodes = {{"n0", {4000, 1000, 0}, {}}, {"n1", {8000, 1000, 1}, {}}};
  spec.queues = {{"default", 1}};
  return spec;
}

std::unique_ptr<NodeCluster> make(model::ClusterSpec spec = two_nodes()) {
  auto cluster = make_sim_cluster(std::move(spec));
  EXPECT_TRUE(cluster.is_ok());
  return std::move(cluster).value();
}

model::WorkloadSpec work(int64_t cpu, int64_t memory, int32_t replicas = 1) {
  model::WorkloadSpec spec;
  spec.name = "w";
  spec.resources = {cpu, memory, 0};
  spec.replicas = replicas;
  return spec;
}

TEST(SimClusterTest, ReservationIsAllOrNothingOnTheLeastAllocatedNodes) {
  auto owned = make();
  NodeCluster& cluster = *owned;
  auto nodes = cluster.reserve("a", work(3000, 100, 2));
  ASSERT_TRUE(nodes.is_ok());
  EXPECT_EQ(*nodes, (std::vector<std::string>{"n0", "n1"}));
  // 3 more replicas of 3 cpu: only n1 has room for one. Nothing changes.
  EXPECT_FALSE(cluster.reserve("b", work(3000, 100, 2)).is_ok());
  EXPECT_EQ(cluster.capacity().free.cpu_milli, 6000);
  EXPECT_EQ(cluster.capacity().largest_free_node.cpu_milli, 5000);
  EXPECT_TRUE(cluster.check_invariants());
}

TEST(SimClusterTest, NeverOverCommitsANode) {
  auto owned = make();
  NodeCluster& cluster = *owned;
  int placed = 0;
  for (int i = 0; i < 20; ++i) placed += cluster.reserve("w" + std::to_string(i), work(1000, 10)).is_ok();
  EXPECT_EQ(placed, 12);
  for (const auto& node : cluster.nodes()) EXPECT_TRUE(node.capacity.fits(node.peak_allocated));
  EXPECT_TRUE(cluster.check_invariants());
}

TEST(SimClusterTest, StartedWorkRunsForItsDurationThenFreesItsNodes) {
  auto owned = make();
  NodeCluster& cluster = *owned;
  TimePoint t0 = from_millis(1000);
  ASSERT_TRUE(cluster.reserve("a", work(4000, 10)).is_ok());
  LaunchRequest request{"a", "uid-a", 1, "src", work(4000, 10), {"n1"}, t0};
  request.spec.sim.duration = Duration(500);
  ASSERT_TRUE(cluster.launch(request).is_ok());
  auto events = cluster.observe(t0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, WorkloadEventKind::kStarted);
  EXPECT_TRUE(cluster.observe(t0 + Duration(499)).empty());
  events = cluster.observe(t0 + Duration(500));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, WorkloadEventKind::kSucceeded);
  EXPECT_EQ(cluster.capacity().free.cpu_milli, 12000);
}

TEST(SimClusterTest, AWorkloadThatNamesAnImageNeverFitsABackendThatRunsNone) {
  auto owned = make();
  NodeCluster& cluster = *owned;
  model::WorkloadSpec spec = work(1000, 10);
  spec.image = "busybox:1.36";
  Status fits = cluster.fits_when_idle(spec);
  ASSERT_FALSE(fits.is_ok());
  EXPECT_EQ(fits.message().rfind("NeverFits: spec.image", 0), 0u) << fits.message();
  // Nor does a launch run it, whatever reserved the room.
  ASSERT_TRUE(cluster.reserve("a", spec).is_ok());
  Status launched = cluster.launch({"a", "uid-a", 1, "src", spec, {"n1"}, from_millis(1000)});
  EXPECT_NE(launched.message().find("spec.image"), std::string::npos) << launched.message();
  spec.image.clear();
  EXPECT_TRUE(cluster.fits_when_idle(spec).is_ok());
}

TEST(SimClusterTest, AskingWhetherWorkFitsAnIdleClusterHoldsNothing) {
  auto owned = make();
  NodeCluster& cluster = *owned;
  model::WorkloadSpec everything = work(4000, 1000, 2);  // both nodes' whole memory
  for (int ask = 0; ask < 3; ++ask) EXPECT_TRUE(cluster.fits_when_idle(everything).is_ok()) << "ask " << ask;
  EXPECT_TRUE(cluster.reserve("a", everything).is_ok()) << "the asks reserved nothing";
  EXPECT_TRUE(cluster.fits_when_idle(everything).is_ok()) << "idle means as if nothing were held";
  EXPECT_FALSE(cluster.fits_when_idle(work(4000, 1000, 3)).is_ok()) << "three replicas never fit two nodes";
}

constexpr auto kReserved = Cluster::Restored::kReserved;
constexpr auto kLaunched = Cluster::Restored::kLaunched;

TEST(SimClusterTest, RestoreRefusesAReservationThatNoLongerFits) {
  auto owned = make();
  NodeCluster& cluster = *owned;
  EXPECT_TRUE(cluster.restore("a", work(4000, 10), {"n0"}, kReserved).is_ok());
  EXPECT_FALSE(cluster.restore("b", work(1000, 10), {"n0"}, kReserved).is_ok());
  EXPECT_FALSE(cluster.restore("c", work(1000, 10), {"gone"}, kReserved).is_ok());
  EXPECT_FALSE(cluster.restore("d", work(1000, 10), {"gone"}, kLaunched).is_ok())
      << "its node is gone, and it with it";
  EXPECT_TRUE(cluster.check_invariants());
}

// n0 had 6 cpu when its copies were launched; it came back with 4. What
// may run there is held all the same (refused, it would be placed again
// while it still ran), and the 2 cpu it lacks are withheld: nothing new
// goes to n0 until its work has left room below its 4 cpu.
TEST(SimClusterTest, LaunchedWorkIsHeldOnANodeThatShrankWhileTheAgentWasDown) {
  auto owned = make();
  NodeCluster& cluster = *owned;
  ASSERT_TRUE(cluster.restore("a", work(4000, 10), {"n0"}, kLaunched).is_ok());
  ASSERT_TRUE(cluster.restore("b", work(1000, 10, 2), {"n0", "n0"}, kLaunched).is_ok());
  EXPECT_TRUE(cluster.check_invariants());
  const NodeUsage& n0 = cluster.nodes()[0];
  EXPECT_EQ(n0.capacity.cpu_milli, 6000) << "the books hold what runs";
  EXPECT_EQ(n0.allocated.cpu_milli, 6000);
  EXPECT_EQ(n0.taken_by_others.cpu_milli, 2000) << "the room n0 lacks is withheld";
  EXPECT_FALSE(cluster.restore("c", work(1000, 10), {"n0"}, kReserved).is_ok())
      << "what was only reserved is not held beyond the node's room";
  EXPECT_EQ(cluster.capacity().free.cpu_milli, 8000) << "all of it n1's";
  auto placed = cluster.reserve("d", work(1000, 10));
  ASSERT_TRUE(placed.is_ok());
  EXPECT_EQ(*placed, std::vector<std::string>{"n1"});

  cluster.release("a");  // never launched again here: its room is freed at once
  EXPECT_EQ(cluster.capacity().free.cpu_milli, 7000 + 2000)
      << "n0's 4 cpu less the 2 b holds, and n1's 7";
  EXPECT_TRUE(cluster.check_invariants());
}

}  // namespace
}  // namespace shoal::cluster

namespace shoal::cluster {
namespace {

TEST(SimClusterTest, QuotaAndQueueDecideAdmissionAndCapAdvertisedCapacity) {
  model::ClusterSpec spec = two_nodes();
  spec.resource_quotas = {{"default", {{"cpu", "5"}}}};
  auto owned = make(spec);
  NodeCluster& cluster = *owned;
  EXPECT_EQ(cluster.capacity_for("default").free.cpu_milli, 5000);
  EXPECT_EQ(cluster.capacity_for("other").free.cpu_milli, 12000);
  ASSERT_TRUE(cluster.reserve("a", work(4000, 10)).is_ok());
  auto refused = cluster.reserve("b", work(2000, 10));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(), "QuotaExceeded:cpu");
  model::WorkloadSpec unknown_queue = work(1000, 10);
  unknown_queue.queue = "gpu";
  EXPECT_EQ(cluster.reserve("c", unknown_queue).status().message(), "NoSuchQueue:gpu");
  cluster.release("a");
  EXPECT_TRUE(cluster.reserve("b", work(2000, 10)).is_ok()) << "released quota is usable again";
  EXPECT_TRUE(cluster.check_invariants());
}

// A runner on a shared backend (Slurm): others' work takes room, and the
// manager may stop answering. Set by the test.
class SharedRunner final : public Runner {
 public:
  std::map<std::string, model::Resources> taken;
  Status healthy = Status::ok();
  bool own_starts = false;
  std::vector<model::NodeSpec> joined;  // handed over at the next observe
  std::vector<WorkloadEvent> events;     // reported at the next observe
  Status launch(const LaunchRequest&) override { return Status::ok(); }
  bool stop(const std::string&, Duration) override { return true; }
  std::vector<WorkloadEvent> observe(TimePoint) override { return std::exchange(events, {}); }
  TimePoint next_event_at() const override { return TimePoint::max(); }
  void forget(const std::string&) override {}
  std::string describe(const std::string&) const override { return ""; }
  Result<LogChunk> read_log(const std::string&, int, int64_t, size_t) const override {
    return not_found("none");
  }
  std::map<std::string, model::Resources> room_taken_by_others() const override { return taken; }
  Status health() const override { return healthy; }
  bool reports_starts() const override { return own_starts; }
  std::vector<model::NodeSpec> take_node_changes() override { return std::exchange(joined, {}); }
};

// Reserves room for `spec` as `key` and launches it at epoch 1.
bool reserve_and_launch(NodeCluster& cluster, const std::string& key, const model::WorkloadSpec& spec) {
  auto nodes = cluster.reserve(key, spec);
  if (!nodes.is_ok()) return false;
  LaunchRequest request;
  request.key = key;
  request.epoch = 1;
  request.spec = spec;
  request.nodes = *nodes;
  return cluster.launch(request).is_ok();
}

// two_nodes() on a SharedRunner, which the test steers through `runner`.
struct SharedCluster {
  SharedRunner* runner = nullptr;
  std::unique_ptr<NodeCluster> cluster;
};
SharedCluster make_shared_cluster() {
  auto runner = std::make_unique<SharedRunner>();
  SharedRunner* steered = runner.get();
  auto made = NodeCluster::create(two_nodes(), std::move(runner));
  EXPECT_TRUE(made.is_ok()) << made.status().message();
  return {steered, made.is_ok() ? std::move(made).value() : nullptr};
}

TEST(SharedBackendTest, OthersWorkShrinksTheRoomAndItsEndIsReportedAsFreedRoom) {
  SharedCluster made = make_shared_cluster();
  ASSERT_NE(made.cluster, nullptr);
  SharedRunner& shared = *made.runner;
  NodeCluster& cluster = *made.cluster;
  TimePoint now = from_millis(1000);
  // A local user takes all of n1 and 3 of n0's 4 cpus.
  shared.taken = {{"n0", {3000, 0, 0}}, {"n1", {8000, 1000, 1}}};
  EXPECT_TRUE(cluster.observe(now).empty()) << "taking room frees none";
  EXPECT_EQ(cluster.capacity().free.cpu_milli, 1000);
  EXPECT_EQ(cluster.capacity().largest_free_node.cpu_milli, 1000);
  EXPECT_FALSE(cluster.reserve("big", work(2000, 10)).is_ok()) << "no node has 2 cpus free";
  ASSERT_TRUE(cluster.reserve("small", work(1000, 10)).is_ok());
  EXPECT_EQ(cluster.capacity().free.cpu_milli, 0);
  // Whatever it could run when idle still counts as fitting (worth queuing).
  EXPECT_TRUE(cluster.fits_when_idle(work(8000, 10)).is_ok());
  EXPECT_TRUE(cluster.enqueue("big", work(2000, 10)));
  EXPECT_TRUE(cluster.serve_queue().empty());

  // The local user's work ends: room freed, said once, and the queue gets it.
  shared.taken = {{"n0", {3000, 0, 0}}};
  std::vector<WorkloadEvent> events = cluster.observe(now);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, WorkloadEventKind::kStopped);
  EXPECT_EQ(events[0].key, "");
  EXPECT_TRUE(cluster.observe(now).empty()) << "no change, no event";
  std::vector<Cluster::Reserved> served = cluster.serve_queue();
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(served[0].nodes, std::vector<std::string>{"n1"});
  for (const NodeUsage& node : cluster.nodes()) {
    EXPECT_EQ(node.taken_by_others.cpu_milli, node.name == "n0" ? 3000 : 0);
  }
  EXPECT_TRUE(cluster.check_invariants());
}

// A node that joins the cluster (Kubernetes) is scheduled on from the next
// observe: more room advertised, said as room freed so queued work gets it.
TEST(SharedBackendTest, ANodeThatJoinsIsScheduledOnAndItsRoomAdvertised) {
  SharedCluster made = make_shared_cluster();
  ASSERT_NE(made.cluster, nullptr);
  NodeCluster& cluster = *made.cluster;
  TimePoint now = from_millis(1000);
  ASSERT_TRUE(cluster.reserve("held", work(3000, 10, 2)).is_ok());
  EXPECT_TRUE(cluster.enqueue("big", work(16000, 10)));
  EXPECT_TRUE(cluster.serve_queue().empty());
  uint64_t version = cluster.capacity_version();
  made.runner->joined = {{"n2", {16000, 1000, 0}, {{"pool", "new"}}}, {"n0", {4000, 1000, 0}, {}}};
  std::vector<WorkloadEvent> events = cluster.observe(now);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, WorkloadEventKind::kStopped);
  EXPECT_EQ(events[0].key, "");
  EXPECT_GT(cluster.capacity_version(), version);
  ASSERT_EQ(cluster.nodes().size(), 3u) << "a name it had already is not added again";
  EXPECT_EQ(cluster.capacity().largest_free_node.cpu_milli, 16000);
  std::vector<Cluster::Reserved> served = cluster.serve_queue();
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(served[0].nodes, std::vector<std::string>{"n2"});
  model::WorkloadSpec selected = work(1000, 10);
  selected.node_selector = {{"pool", "new"}};
  EXPECT_TRUE(cluster.fits_when_idle(selected).is_ok()) << "its labels select it";
  cluster.release("held");
  EXPECT_TRUE(cluster.check_invariants());
}

// A known node's allocatable and labels change after it joined: a device
// plugin registers GPUs, an operator labels the node, the kubelet reserves
// more for the system. What grew or was relabelled is scheduled on; what
// shrank under the work it holds keeps that work and takes nothing new
// until there is room again.
TEST(SharedBackendTest, ANodesNewAllocatableAndLabelsAreScheduledWith) {
  SharedCluster made = make_shared_cluster();
  ASSERT_NE(made.cluster, nullptr);
  NodeCluster& cluster = *made.cluster;
  TimePoint now = from_millis(1000);
  model::WorkloadSpec gpu_job = work(1000, 10);
  gpu_job.resources.gpu = 2;
  gpu_job.node_selector = {{"accelerator", "a100"}};
  EXPECT_FALSE(cluster.fits_when_idle(gpu_job).is_ok());

  // n0 gains two GPUs and a label.
  made.runner->joined = {{"n0", {4000, 1000, 2}, {{"accelerator", "a100"}}}};
  std::vector<WorkloadEvent> events = cluster.observe(now);
  ASSERT_EQ(events.size(), 1u) << "its room grew";
  EXPECT_EQ(events[0].kind, WorkloadEventKind::kStopped);
  ASSERT_EQ(cluster.nodes().size(), 2u) << "the same node, changed, not a new one";
  EXPECT_TRUE(cluster.fits_when_idle(gpu_job).is_ok()) << "its new labels and GPUs select it";
  auto held = cluster.reserve("gpu", gpu_job);
  ASSERT_TRUE(held.is_ok()) << held.status().message();
  EXPECT_EQ(*held, std::vector<std::string>{"n0"});

  // Its allocatable shrinks under what it holds: the copy stays, nothing
  // new fits there, and the books stay within capacity.
  made.runner->joined = {{"n0", {1500, 1000, 2}, {{"accelerator", "a100"}}}};
  uint64_t version = cluster.capacity_version();
  EXPECT_TRUE(cluster.observe(now).empty()) << "no room was freed";
  EXPECT_GT(cluster.capacity_version(), version);
  model::WorkloadSpec small = work(1000, 10);
  small.node_selector = {{"accelerator", "a100"}};
  EXPECT_FALSE(cluster.reserve("small", small).is_ok()) << "1.5 cpu, 1 held: no room for 1 more";
  EXPECT_TRUE(cluster.check_invariants());

  // Back to 4 cpus: the room it had is free again.
  made.runner->joined = {{"n0", {4000, 1000, 2}, {{"accelerator", "a100"}}}};
  events = cluster.observe(now);
  ASSERT_EQ(events.size(), 1u) << "room was freed";
  EXPECT_TRUE(cluster.reserve("small", small).is_ok());
  cluster.release("gpu");
  cluster.release("small");
  EXPECT_TRUE(cluster.check_invariants());
}

// The target's CAPACITY pass reuses its offers while capacity_version()
// stays the same, so every change of room must move it: room held
// (reserve, serve_queue, restore), freed (work ending, stop), and taken or
// given back by others. What changes no room leaves it, or nothing could
// be reused.
TEST(SharedBackendTest, TheCapacityVersionMovesWithEveryChangeOfRoom) {
  SharedCluster made = make_shared_cluster();
  ASSERT_NE(made.cluster, nullptr);
  SharedRunner& shared = *made.runner;
  NodeCluster& cluster = *made.cluster;
  TimePoint now = from_millis(1000);
  uint64_t version = cluster.capacity_version();
  int64_t free_cpu = cluster.capacity().free.cpu_milli;
  // Each step must change the free cpu and the version, or neither.
  auto expect_step = [&](const char* what, bool room_changes) {
    uint64_t after = cluster.capacity_version();
    int64_t free_after = cluster.capacity().free.cpu_milli;
    EXPECT_EQ(free_after != free_cpu, room_changes) << what;
    EXPECT_EQ(after != version, room_changes) << what;
    version = after;
    free_cpu = free_after;
  };
  ASSERT_TRUE(cluster.reserve("a", work(1000, 10)).is_ok());
  expect_step("reserve", true);
  EXPECT_FALSE(cluster.reserve("too-big", work(9000, 10)).is_ok());
  expect_step("a refused reserve", false);
  EXPECT_TRUE(cluster.enqueue("b", work(2000, 10)));
  expect_step("enqueue", false);
  EXPECT_EQ(cluster.serve_queue().size(), 1u);
  expect_step("serve_queue", true);
  EXPECT_TRUE(cluster.observe(now).empty());
  expect_step("observe with nothing new", false);
  shared.taken = {{"n0", {1000, 0, 0}}};
  cluster.observe(now);
  expect_step("others take room", true);
  shared.taken = {};
  cluster.observe(now);
  expect_step("others give it back", true);
  cluster.stop("a", Duration(0));
  expect_step("stop", true);
  ASSERT_TRUE(cluster.restore("a", work(1000, 10), {"n1"}, Cluster::Restored::kLaunched).is_ok());
  expect_step("restore", true);
  cluster.release("b");
  expect_step("release", true);
  EXPECT_TRUE(cluster.check_invariants());
}

TEST(SharedBackendTest, AnUnansweringBackendReservesNothingAndSaysWhy) {
  SharedCluster made = make_shared_cluster();
  ASSERT_NE(made.cluster, nullptr);
  SharedRunner& shared = *made.runner;
  NodeCluster& cluster = *made.cluster;
  shared.healthy = Status(ErrorCode::kUnavailable, "slurmrestd: timed out");
  EXPECT_EQ(cluster.health().message(), "slurmrestd: timed out");
  auto refused = cluster.reserve("a", work(1000, 10));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(), "BackendUnavailable: slurmrestd: timed out");
  EXPECT_TRUE(cluster.enqueue("a", work(1000, 10)));
  EXPECT_TRUE(cluster.serve_queue().empty()) << "the queue waits for the backend";
  shared.healthy = Status::ok();
  EXPECT_EQ(cluster.serve_queue().size(), 1u);
  EXPECT_TRUE(cluster.check_invariants());
}

// A runner whose backend may queue the work (Slurm) says when it started;
// the others' launches are Started at once.
TEST(SharedBackendTest, ALaunchIsStartedAtOnceUnlessTheRunnerReportsStartsItself) {
  for (bool own_starts : {false, true}) {
    auto runner = std::make_unique<SharedRunner>();
    runner->own_starts = own_starts;
    auto made = NodeCluster::create(two_nodes(), std::move(runner));
    ASSERT_TRUE(made.is_ok());
    NodeCluster& cluster = **made;
    ASSERT_TRUE(reserve_and_launch(cluster, "a", work(1000, 10)));
    std::vector<WorkloadEvent> events = cluster.observe(from_millis(1000));
    if (own_starts) {
      EXPECT_TRUE(events.empty());
    } else {
      ASSERT_EQ(events.size(), 1u);
      EXPECT_EQ(events[0].kind, WorkloadEventKind::kStarted);
    }
  }
}

// Why launched work waits to start (an image it cannot pull) is passed on
// and frees nothing: the work may still start, in the room it holds.
TEST(SharedBackendTest, AWaitingReasonIsPassedOnAndKeepsTheRoomHeld) {
  SharedCluster made = make_shared_cluster();
  ASSERT_NE(made.cluster, nullptr);
  NodeCluster& cluster = *made.cluster;
  made.runner->own_starts = true;
  ASSERT_TRUE(reserve_and_launch(cluster, "a", work(3000, 10)));
  int64_t free_cpu = cluster.capacity().free.cpu_milli;
  made.runner->events = {{"a", WorkloadEventKind::kWaiting, from_millis(1000), 0, "pod p: ImagePullBackOff"}};
  std::vector<WorkloadEvent> events = cluster.observe(from_millis(1000));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, WorkloadEventKind::kWaiting);
  EXPECT_EQ(events[0].message, "pod p: ImagePullBackOff");
  EXPECT_EQ(cluster.capacity().free.cpu_milli, free_cpu) << "its room stays held";
  cluster.release("a");
  EXPECT_EQ(cluster.capacity().free.cpu_milli, free_cpu + 3000);
  EXPECT_TRUE(cluster.check_invariants());
}

}  // namespace
}  // namespace shoal::cluster
