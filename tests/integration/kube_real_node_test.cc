// How a pod ends on a real node, and what the source does about it
// (docs/backends.md, "How a pod ends"): the kubernetes backend against the
// dev cluster's real node (scripts/k8s-dev.sh up --real-node), whose pods
// run as containers under containerd and runc, are evicted by the real
// controllers and stopped by a real kubelet. Run by tests/real_node_run.sh
// inside the cluster's test host, which names the cluster in
// SHOAL_REAL_NODE_DIR; skipped (77) without it, failed under CI=true.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "dev_slurm.h"  // run_shell
#include "harness.h"
#include "model/quantity.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string real_node_dir() {
  const char* dir = std::getenv("SHOAL_REAL_NODE_DIR");
  return dir ? dir : "";
}

class RealNode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (real_node_dir().empty()) {
      const char* ci = std::getenv("CI");
      if (ci && std::string(ci) == "true") FAIL() << "SHOAL_REAL_NODE_DIR is not set (run by tests/real_node_run.sh)";
      GTEST_SKIP() << "no real node (tests/real_node_run.sh starts one and runs this inside it)";
    }
    kubeconfig_ = real_node_dir() + "/admin.kubeconfig";
    kubectl_ = "timeout 90 " + run_shell("bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh bin-dir 2>/dev/null");
    while (!kubectl_.empty() && kubectl_.back() == '\n') kubectl_.pop_back();
    kubectl_ += "/kubectl --kubeconfig " + kubeconfig_;
    // Every test starts from a node without work, schedulable, untainted.
    kubectl("delete pods --all -n batch --grace-period=0 --force --wait=true --timeout=60s 2>&1");
    kubectl("uncordon shoal-node 2>&1");
    kubectl("taint nodes shoal-node shoal.dev/maintenance- 2>&1");
    kubectl("create namespace batch 2>&1");
    std::string tiny = dir_.path() + "/tiny.yaml";
    std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                           "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
    // East lends the real node; north, in the same Kubernetes cluster,
    // the KWOK node beside it: where a copy ended at east is placed again.
    for (auto [agent, pool] : {std::pair{&east_, "real"}, std::pair{&north_, "kwok"}}) {
      std::string manifest = dir_.path() + "/" + agent->name() + ".yaml";
      std::ofstream(manifest) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: " << agent->name()
                              << "}\nspec:\n  backend: kubernetes\n  kubernetes:\n    kubeconfig: " << kubeconfig_
                              << "\n    timeout: 5s\n    nodeSelector: {type: " << pool << "}\n"
                              << (agent == &east_ ? east_extra() : "");
      agent->init({"--cluster-config", manifest});
    }
    source_.init({"--cluster-config", tiny});
    for (AgentProcess* agent : {&source_, &east_, &north_}) {
      agent->set_config("heartbeatInterval", "300ms");
      agent->set_config("gcInterval", "1s");
      ASSERT_TRUE(agent->start()) << agent->name() << "\n" << agent->log();
    }
    ASSERT_EQ(invite(east_, source_, "batch"), "");
    ASSERT_TRUE(wait_until([&] { return !advertised_free_cpu(source_, "east", "batch").empty(); }, 20s))
        << "east never advertised the real node\n" << east_.log();
  }
  void TearDown() override {
    source_.stop();
    east_.stop();
    north_.stop();
  }

  // North takes work from now on.
  void invite_north() {
    ASSERT_EQ(invite(north_, source_, "batch"), "");
    ASSERT_TRUE(wait_until([&] { return !advertised_free_cpu(source_, "north", "batch").empty(); }, 20s))
        << "north never advertised the KWOK node\n" << north_.log();
  }

  // More of east's Cluster manifest (spec.kubernetes' fields, indented).
  virtual std::string east_extra() const { return ""; }

  std::string kubectl(const std::string& args) const { return run_shell(kubectl_ + " " + args); }

  // Submits `name` to namespace batch with `spec`'s body (a flow mapping's),
  // to run at east or north (the source's own sim cluster would take it too).
  std::string submit(const std::string& name, const std::string& spec) {
    std::string path = dir_.path() + "/" + name + ".yaml";
    std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
                        << ", namespace: batch}\nspec: {placement: {clusters: [east, north]}, " << spec << "}\n";
    CommandResult result = source_.ctl({"submit", "-f", path});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    json described = describe(name);
    return described.is_null() ? "" : described["metadata"]["uid"].get<std::string>();
  }
  json describe(const std::string& name) { return source_.ctl_json({"describe", "workload", "batch/" + name}); }
  json status(const std::string& name) {
    json described = describe(name);
    return described.is_null() ? json::object() : described["status"];
  }
  std::string phase(const std::string& name) { return status(name).value("phase", ""); }
  int epoch(const std::string& name) { return status(name).value("epoch", 0); }
  // The workload's pods, as kubectl lists them.
  json pods_of(const std::string& uid) {
    json parsed = json::parse(kubectl("get pods -n batch -l shoal.dev/uid=" + uid + " -o json"), nullptr, false);
    return parsed.is_discarded() ? json::array() : parsed.value("items", json::array());
  }
  // The name of the workload's pod of `epoch`, once it exists; "" before.
  std::string pod_of(const std::string& uid, int epoch_number) {
    for (const json& pod : pods_of(uid)) {
      if (pod["metadata"]["labels"].value("shoal.dev/epoch", "") == std::to_string(epoch_number)) {
        return pod["metadata"]["name"];
      }
    }
    return "";
  }
  std::string context(const std::string& name) {
    return describe(name).dump(2) + "\n--- east:\n" + east_.log().substr(east_.log().size() > 4000 ? east_.log().size() - 4000 : 0);
  }

  // A workload that runs until its pod is ended from outside.
  static std::string runs_until_ended() {
    return "resources: {cpu: 100m, memory: 32Mi}, terminationGracePeriod: 2s, command: [sleep, \"600\"]";
  }
  // Waits for the workload's first copy to run as a container at east,
  // then lets north take work.
  void await_running_at_east(const std::string& name) {
    ASSERT_TRUE(wait_until([&] { return phase(name) == "Running"; }, 60s)) << context(name);
    ASSERT_EQ(epoch(name), 1) << context(name);
    ASSERT_EQ(status(name).value("cluster", ""), "east") << context(name);
    invite_north();
  }
  // Its end at east was the cluster's (`cause`), not its own: counted as a
  // disruption, and placed again, at north (a source does not place a copy
  // again where it was just disrupted).
  void expect_placed_again_after(const std::string& name, const std::string& cause) {
    ASSERT_TRUE(wait_until([&] { return status(name).value("cluster", "") == "north" && phase(name) == "Running"; },
                           90s))
        << context(name);
    EXPECT_EQ(epoch(name), 2) << context(name);
    EXPECT_EQ(status(name).value("disruptions", 0), 1) << context(name);
    bool named = false;
    json described = describe(name);
    for (const json& event : described["events"]) {
      named = named || event.value("text", "").rfind("Failed at east: " + cause, 0) == 0;
    }
    EXPECT_TRUE(named) << "the end at east is not read as " << cause << ":\n" << context(name);
  }

  TempDir dir_;
  AgentProcess source_{"source", dir_.path()};
  AgentProcess east_{"east", dir_.path()};
  AgentProcess north_{"north", dir_.path()};
  std::string kubeconfig_, kubectl_;
};

// exit 0 and exit N are the job's own ends: mirrored, never placed again;
// what the container wrote is read at the source.
TEST_F(RealNode, ExitZeroSucceedsAndExitNFailsAsTheJobsOwnWithTheContainersOutput) {
  submit("ok", "resources: {cpu: 100m, memory: 32Mi}, command: [sh, -c, 'echo \"hello from $(hostname)\"']");
  submit("three", "resources: {cpu: 100m, memory: 32Mi}, command: [sh, -c, 'echo bad; exit 3']");
  ASSERT_TRUE(wait_until([&] { return phase("ok") == "Succeeded"; }, 60s)) << context("ok");
  CommandResult logs = source_.ctl({"logs", "batch/ok"});
  EXPECT_EQ(logs.out.rfind("hello from shoal-", 0), 0u) << logs.out << logs.err;
  ASSERT_TRUE(wait_until([&] { return phase("three") == "Failed"; }, 60s)) << context("three");
  EXPECT_EQ(status("three")["exitCode"], 3) << context("three");
  EXPECT_EQ(status("three").value("disruptions", 0), 0) << "its own exit code, not placed again";
  EXPECT_EQ(epoch("three"), 1);
}

// The kernel kills a container over its memory limit: the job's own end.
TEST_F(RealNode, OomKilledIsTheJobsOwnFailure) {
  submit("hungry", "resources: {cpu: 100m, memory: 16Mi}, command: [sh, -c, 'tail /dev/zero']");
  ASSERT_TRUE(wait_until([&] { return phase("hungry") == "Failed"; }, 90s)) << context("hungry");
  EXPECT_NE(status("hungry").value("reason", "").find("OOMKilled"), std::string::npos) << context("hungry");
  EXPECT_EQ(status("hungry").value("disruptions", 0), 0) << context("hungry");
  EXPECT_EQ(epoch("hungry"), 1);
}

// Deleted at the cluster (kubectl delete pod): the pod terminates for its
// grace period, its room held and its copy still the one that runs; then
// the workload is placed again. Its container's exit code (137 after the
// kill: sleep as PID 1 ignores SIGTERM) is not taken for the job's own.
TEST_F(RealNode, APodDeletedAtTheClusterHoldsItsRoomUntilGoneThenIsPlacedAgain) {
  std::string uid = submit("deleted", runs_until_ended());
  await_running_at_east("deleted");
  std::string pod = pod_of(uid, 1);
  ASSERT_FALSE(pod.empty()) << pods_of(uid).dump(2);
  kubectl("delete pod -n batch " + pod + " --wait=false 2>&1");
  ASSERT_TRUE(wait_until([&] {
    return kubectl("get pod -n batch " + pod + " -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null") != "";
  }, 10s));
  // Terminating: not yet ended, not yet placed again.
  EXPECT_EQ(epoch("deleted"), 1) << context("deleted");
  EXPECT_NE(phase("deleted"), "Failed") << context("deleted");
  expect_placed_again_after("deleted", "Evicted");
}

// kubectl drain evicts through the Eviction API (the pod is marked
// DisruptionTarget: EvictionByEvictionAPI): placed again once the node
// takes work again.
TEST_F(RealNode, AnEvictionThroughTheEvictionApiIsPlacedAgain) {
  std::string uid = submit("drained", runs_until_ended());
  await_running_at_east("drained");
  std::string out = kubectl("drain shoal-node --pod-selector shoal.dev/uid=" + uid +
                            " --ignore-daemonsets --force --timeout 60s 2>&1");
  EXPECT_NE(out.find("evicting pod batch/"), std::string::npos) << out;
  kubectl("uncordon shoal-node 2>&1");
  expect_placed_again_after("drained", "Evicted");
}

// A NoExecute taint behind the agent's back: the taint manager deletes the
// pod (DeletionByTaintManager), an eviction, not the job's failure.
TEST_F(RealNode, ANoExecuteTaintIsAnEvictionNotTheJobsFailure) {
  std::string uid = submit("tainted", runs_until_ended());
  await_running_at_east("tainted");
  kubectl("taint nodes shoal-node shoal.dev/maintenance=now:NoExecute 2>&1");
  ASSERT_TRUE(wait_until([&] { return pod_of(uid, 1).empty(); }, 60s)) << pods_of(uid).dump(2);
  kubectl("taint nodes shoal-node shoal.dev/maintenance- 2>&1");
  expect_placed_again_after("tainted", "Evicted");
}

// The agent's pods pass Pod Security "restricted" as they are: not root,
// the runtime's seccomp profile, no capabilities, no privilege escalation.
TEST_F(RealNode, ThePodsPassPodSecurityRestrictedAndRunAsNobody) {
  kubectl("label namespace batch pod-security.kubernetes.io/enforce=restricted --overwrite 2>&1");
  submit("hardened", "resources: {cpu: 100m, memory: 32Mi}, command: [sh, -c, 'id -u']");
  bool ended = wait_until([&] { return phase("hardened") == "Succeeded" || phase("hardened") == "Failed"; }, 60s);
  kubectl("label namespace batch pod-security.kubernetes.io/enforce- 2>&1");
  ASSERT_TRUE(ended) << context("hardened");
  ASSERT_EQ(phase("hardened"), "Succeeded") << context("hardened");
  EXPECT_EQ(source_.ctl({"logs", "batch/hardened"}).out, "65534\n");
}

// The API server refuses the pod (a ResourceQuota that allows none): the
// reason reaches the source, and the copy is not created again and again.
TEST_F(RealNode, ACreateTheApiServerRefusesIsReportedWithItsReasonOnce) {
  kubectl("create quota no-pods -n batch --hard=pods=0 2>&1");
  submit("refused", "resources: {cpu: 100m, memory: 32Mi}, command: [sh, -c, 'echo never']");
  bool ended = wait_until([&] { return phase("refused") == "Failed"; }, 60s);
  kubectl("delete quota no-pods -n batch 2>&1");
  ASSERT_TRUE(ended) << context("refused");
  std::string reason = status("refused").value("reason", "");
  EXPECT_NE(reason.find("exceeded quota"), std::string::npos) << context("refused");
  EXPECT_EQ(epoch("refused"), 1) << context("refused");
  std::string log = east_.log();
  size_t refusals = 0;
  for (size_t at = log.find("exceeded quota"); at != std::string::npos; at = log.find("exceeded quota", at + 1)) {
    ++refusals;
  }
  EXPECT_LE(refusals, 2u) << "a refused create is not retried:\n" << log;
}

// A pod of the cluster's own (not the agent's), bound by kube-scheduler to
// the real node: `cpu` requested, sleeping.
std::string local_pod(const std::string& name, const std::string& cpu, const std::string& priority_class = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: default}\nspec:\n" +
         (priority_class.empty() ? "" : "  priorityClassName: " + priority_class + "\n") +
         "  nodeSelector: {kubernetes.io/hostname: shoal-node}\n  terminationGracePeriodSeconds: 0\n"
         "  containers:\n  - {name: main, image: busybox:1.36, imagePullPolicy: Never, command: [sleep, \"600\"],\n"
         "     resources: {requests: {cpu: " + cpu + ", memory: 16Mi}}}\n";
}

// The image cannot be had (no registry answers in the test host): the pod
// waits in ErrImagePull / ImagePullBackOff, which the source shows while
// the copy is Bound; east gives it up after its startTimeout, saying why,
// and the source places it again at north.
TEST_F(RealNode, APodWhoseImageCannotBePulledIsGivenUpAfterStartTimeoutWithTheKubeletsReason) {
  std::string uid = submit("unpullable", "image: registry.invalid/shoal/none:1, startTimeout: 20s, " +
                                             runs_until_ended());
  ASSERT_TRUE(wait_until([&] { return !pod_of(uid, 1).empty(); }, 30s)) << context("unpullable");
  EXPECT_EQ(status("unpullable").value("cluster", ""), "east") << context("unpullable");
  auto pull_failed = [](const std::string& text) {
    return text.find("ErrImagePull") != std::string::npos || text.find("ImagePullBackOff") != std::string::npos;
  };
  EXPECT_TRUE(wait_until([&] {
    json now = status("unpullable");
    return now.value("phase", "") == "Bound" && pull_failed(now.value("reason", ""));
  }, 20s)) << "the kubelet's waiting reason is not shown while the copy is Bound:\n" << context("unpullable");
  invite_north();
  ASSERT_TRUE(wait_until([&] {
    return status("unpullable").value("cluster", "") == "north" && phase("unpullable") == "Running";
  }, 90s)) << context("unpullable");
  EXPECT_EQ(epoch("unpullable"), 2);
  EXPECT_EQ(status("unpullable").value("disruptions", 0), 1) << context("unpullable");
  bool why = false;
  json described = describe("unpullable");
  for (const json& event : described["events"]) {
    std::string text = event.value("text", "");
    why = why || (text.find("StartTimeout") != std::string::npos && pull_failed(text));
  }
  EXPECT_TRUE(why) << "the kubelet's reason is not shown at the source:\n" << context("unpullable");
  EXPECT_TRUE(wait_until([&] { return pod_of(uid, 1).empty(); }, 30s)) << "east's pod is left behind";
}

// The kubelet refuses the agent's pod at admission: while the kubelet was
// away, the agent bound its pod to the node and a static pod took the
// room; the kubelet, back, admits its static pod first and fails the
// agent's (OutOfcpu). The copy never ran: an eviction, placed again.
TEST_F(RealNode, AKubeletsAdmissionRefusalIsPlacedAgain) {
  std::string node = "bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh node " + real_node_dir();
  std::string manifest = real_node_dir() + "/node/manifests/local-static.yaml";
  ShellAtExit cleanup("rm -f " + manifest + "; " + node + " start 2>&1");
  ASSERT_EQ(run_shell(node + " stop 2>&1"), "");
  // The node stays Ready for the controller's grace period (16 s): the
  // agent still lends it.
  std::string uid = submit("refused", "resources: {cpu: \"1\", memory: 32Mi}, command: [sleep, \"600\"]");
  ASSERT_TRUE(wait_until([&] { return !pod_of(uid, 1).empty(); }, 10s)) << context("refused");
  std::ofstream(manifest) << local_pod("local-static", "1500m");
  ASSERT_EQ(run_shell(node + " start 2>&1"), "");
  invite_north();
  expect_placed_again_after("refused", "Evicted");
  bool admission = false;
  json described = describe("refused");
  for (const json& event : described["events"]) admission |= event.value("text", "").find("OutOfcpu") != std::string::npos;
  EXPECT_TRUE(admission) << "not the kubelet's refusal:\n" << context("refused");
  std::filesystem::remove(manifest);
  EXPECT_TRUE(wait_until([&] { return kubectl("get pods -n default -o name 2>&1").find("local-static") == std::string::npos; },
                         60s));
}

// kube-scheduler places the cluster's own pods beside the agent's, each
// counting what the other bound: a local pod that does not fit beside the
// agent's waits (Unschedulable), and runs once the agent's copy is gone;
// the agent lends only the room the local pod leaves.
TEST_F(RealNode, KubeSchedulerAndTheAgentNeverOverCommitTheNode) {
  std::string uid = submit("big", "resources: {cpu: 1500m, memory: 32Mi}, terminationGracePeriod: 1s, "
                                  "command: [sleep, \"600\"]");
  await_running_at_east("big");
  std::string pod = dir_.path() + "/local.yaml";
  std::ofstream(pod) << local_pod("local", "1200m");
  ASSERT_NE(kubectl("apply -f " + pod + " 2>&1").find("created"), std::string::npos);
  ShellAtExit cleanup(kubectl_ + " delete pod -n default local --grace-period=0 --force 2>&1");
  std::string jsonpath = "-o jsonpath='{.status.conditions[?(@.type==\"PodScheduled\")].reason}'";
  ASSERT_TRUE(wait_until([&] { return kubectl("get pod -n default local " + jsonpath + " 2>&1") == "Unschedulable"; },
                         30s))
      << kubectl("describe pod -n default local 2>&1");
  EXPECT_EQ(phase("big"), "Running");
  EXPECT_EQ(epoch("big"), 1);

  ASSERT_EQ(source_.ctl({"delete", "workload", "batch/big"}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] {
    return kubectl("get pod -n default local -o jsonpath='{.status.phase}' 2>&1") == "Running";
  }, 60s)) << kubectl("describe pod -n default local 2>&1");
  // The scheduler counts a pod until its containers have ended (it is
  // then terminal, or gone).
  for (const json& left : pods_of(uid)) {
    std::string left_phase = left["status"].value("phase", "");
    EXPECT_TRUE(left_phase == "Succeeded" || left_phase == "Failed")
        << "the local pod runs beside the agent's, which is " << left_phase;
  }

  // East now lends what the local pod leaves (less than a core): a
  // workload of a core goes to north.
  ASSERT_TRUE(wait_until([&] {
    auto free = model::parse_cpu_milli(advertised_free_cpu(source_, "east", "batch"), "free cpu");
    return free.is_ok() && *free < 1000;
  }, 30s)) << advertised_free_cpu(source_, "east", "batch");
  std::string second = submit("beside", "resources: {cpu: \"1\", memory: 32Mi}, command: [sleep, \"600\"]");
  ASSERT_TRUE(wait_until([&] { return phase("beside") == "Running"; }, 60s)) << context("beside");
  EXPECT_EQ(status("beside").value("cluster", ""), "north") << context("beside");
  EXPECT_EQ(epoch("beside"), 1);
}

// kube-scheduler preempts the agent's pod for a local pod of higher
// priority (DisruptionTarget PreemptionByScheduler): a preemption, placed
// again; the local pod runs once the agent's has ended.
TEST_F(RealNode, KubeSchedulersPreemptionIsPlacedAgain) {
  kubectl("create priorityclass shoal-test-urgent --value=1000000 2>&1");
  ShellAtExit cleanup(kubectl_ + " delete pod -n default urgent --grace-period=0 --force 2>&1; " + kubectl_ +
                      " delete priorityclass shoal-test-urgent 2>&1");
  submit("preempted", "resources: {cpu: 1500m, memory: 32Mi}, terminationGracePeriod: 2s, command: [sleep, \"600\"]");
  await_running_at_east("preempted");
  std::string pod = dir_.path() + "/urgent.yaml";
  std::ofstream(pod) << local_pod("urgent", "1200m", "shoal-test-urgent");
  ASSERT_NE(kubectl("apply -f " + pod + " 2>&1").find("created"), std::string::npos);
  expect_placed_again_after("preempted", "Preempted");
  EXPECT_TRUE(wait_until([&] {
    return kubectl("get pod -n default urgent -o jsonpath='{.status.phase}' 2>&1") == "Running";
  }, 60s)) << kubectl("describe pod -n default urgent 2>&1");
}

// A pod that Succeeded and was deleted (an operator's cleanup, the pod
// garbage collector) before the agent looked: it ended as it says, and
// is not placed again. East is frozen meanwhile, so the watch brings both
// changes together when it thaws.
TEST_F(RealNode, APodDeletedAfterItSucceededIsASuccessNotAnEviction) {
  std::string uid = submit("finished", "resources: {cpu: 100m, memory: 32Mi}, command: [sleep, \"3\"]");
  await_running_at_east("finished");
  std::string pod = pod_of(uid, 1);
  ASSERT_FALSE(pod.empty());
  east_.pause();
  bool succeeded = wait_until([&] {
    return kubectl("get pod -n batch " + pod + " -o jsonpath='{.status.phase}' 2>&1") == "Succeeded";
  }, 30s);
  std::string deleted = kubectl("delete pod -n batch " + pod + " --wait=true --timeout=30s 2>&1");
  east_.resume();
  ASSERT_TRUE(succeeded) << kubectl("describe pod -n batch " + pod + " 2>&1");
  ASSERT_NE(deleted.find("deleted"), std::string::npos) << deleted;
  ASSERT_TRUE(wait_until([&] { return phase("finished") == "Succeeded" || epoch("finished") > 1; }, 60s))
      << context("finished");
  EXPECT_EQ(phase("finished"), "Succeeded") << context("finished");
  EXPECT_EQ(epoch("finished"), 1) << "run twice:\n" << context("finished");
  EXPECT_EQ(status("finished").value("disruptions", 0), 0) << context("finished");
}

// The node deleted while its kubelet is away: the pod garbage collector
// marks the pod Failed (DisruptionTarget DeletionByPodGC) and removes it:
// a node failure, placed again. The kubelet, back, registers the node
// again and stops the orphaned container.
TEST_F(RealNode, APodTheGarbageCollectorRemovesWithItsNodeIsANodeFailurePlacedAgain) {
  std::string node = "bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh node " + real_node_dir();
  ShellAtExit cleanup(node + " start 2>&1; " + kubectl_ + " wait node/shoal-node --for=condition=Ready --timeout=60s 2>&1");
  std::string uid = submit("orphaned", runs_until_ended());
  await_running_at_east("orphaned");
  ASSERT_EQ(run_shell(node + " stop 2>&1"), "");
  ASSERT_NE(kubectl("delete node shoal-node 2>&1").find("deleted"), std::string::npos);
  // The collector waits 40 s (its quarantine) before it removes the pod.
  expect_placed_again_after("orphaned", "NodeFailed");
  EXPECT_TRUE(pod_of(uid, 1).empty()) << pods_of(uid).dump(2);
}

// A Cluster whose pods tolerate the pool's taint lends that tainted node.
class RealNodeTolerated : public RealNode {
 protected:
  void SetUp() override {
    if (!real_node_dir().empty()) {
      std::string bin = run_shell("bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh bin-dir 2>/dev/null");
      while (!bin.empty() && bin.back() == '\n') bin.pop_back();
      run_shell("timeout 60 " + bin + "/kubectl --kubeconfig " + real_node_dir() +
                "/admin.kubeconfig taint nodes shoal-node shoal.dev/pool=lent:NoExecute --overwrite 2>&1");
    }
    RealNode::SetUp();
  }
  void TearDown() override {
    RealNode::TearDown();
    kubectl("taint nodes shoal-node shoal.dev/pool- 2>&1");
  }
  std::string east_extra() const override {
    return "    tolerations: [{key: shoal.dev/pool, operator: Equal, value: lent, effect: NoExecute}]\n";
  }
};

TEST_F(RealNodeTolerated, ATaintedNodeIsLentWhenTheClustersTolerationsNameItsTaint) {
  std::string uid = submit("tolerant", "resources: {cpu: 100m, memory: 32Mi}, command: [sh, -c, 'echo tolerated']");
  ASSERT_TRUE(wait_until([&] { return phase("tolerant") == "Succeeded"; }, 60s)) << context("tolerant");
  EXPECT_EQ(status("tolerant").value("cluster", ""), "east");
  EXPECT_EQ(source_.ctl({"logs", "batch/tolerant"}).out, "tolerated\n");
  json pods = pods_of(uid);
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0]["spec"]["tolerations"][0].value("key", ""), "shoal.dev/pool") << pods[0]["spec"].dump(2);
}

// The node lost: its kubelet stops (its containers run on), the controller
// marks it NotReady and deletes the pod after the not-ready toleration; the
// pod stays Terminating, since no kubelet confirms its end. The copy is not
// placed again while it may still run; when the node is back, its kubelet
// stops the container, the pod is gone, and the workload is placed again.
TEST_F(RealNode, ANodeLostKeepsItsCopyUntilThePodIsGoneThenPlacesItAgain) {
  std::string uid = submit("stranded", runs_until_ended());
  await_running_at_east("stranded");
  std::string pod = pod_of(uid, 1);
  ASSERT_FALSE(pod.empty());
  std::string node = "bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh node " + real_node_dir();
  ASSERT_EQ(run_shell(node + " stop 2>&1"), "");
  bool deleted = wait_until([&] {
    return kubectl("get pod -n batch " + pod + " -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null") != "";
  }, 90s);
  std::string node_state = kubectl("get node shoal-node -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}'");
  int epoch_while_lost = epoch("stranded");
  std::string phase_while_lost = phase("stranded");
  ASSERT_EQ(run_shell(node + " start 2>&1"), "");
  ASSERT_TRUE(deleted) << "the controller never deleted the pod of the lost node (Ready: " << node_state << ")";
  EXPECT_NE(node_state, "True");
  EXPECT_EQ(epoch_while_lost, 1) << "placed again while its container may still run";
  EXPECT_EQ(phase_while_lost, "Running");
  expect_placed_again_after("stranded", "Evicted");
}

}  // namespace
}  // namespace shoal::testing
