// The kubernetes backend against a real kube-apiserver with KWOK nodes (the
// dev cluster of scripts/k8s-dev.sh), through real agents: a workload runs
// as a pod labelled with its uid and bound to a node the agent's scheduler
// chose, its end is mirrored at the source, a delete at the source deletes
// the pod, a restarted target re-adopts its pod, and pods that local users
// create shrink what the agent advertises.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <string>
#include <vector>

#include "dev_k8s.h"
#include "harness.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

DevK8s& dev_k8s() {
  static DevK8s cluster;
  return cluster;
}
// A second cluster, for work that must go elsewhere.
DevK8s& other_k8s() {
  static DevK8s cluster;
  return cluster;
}
// The agent's kubeconfig: the Helm chart's ServiceAccount, not an admin.
std::string& agent_kubeconfig() {
  static std::string path;
  return path;
}
const auto* const kDevK8s =
    ::testing::AddGlobalTestEnvironment(new DevK8sEnvironment(dev_k8s(), 4, 8, &agent_kubeconfig()));
const auto* const kOtherK8s = ::testing::AddGlobalTestEnvironment(new DevK8sEnvironment(other_k8s(), 2, 8));

// A KWOK node of 8 cpus labelled pool=POOL that one test adds to the dev
// cluster; its pods and then itself are deleted at the end (its pods
// first: once the node is gone, nothing would end them).
class AddedNode {
 public:
  AddedNode(const std::string& dir, const std::string& pool) : name_("kwok-node-" + pool) {
    std::string path = dir + "/" + name_ + ".yaml";
    std::ofstream(path) << "apiVersion: v1\nkind: Node\nmetadata:\n  name: " << name_
                        << "\n  annotations: {kwok.x-k8s.io/node: fake}\n  labels: {pool: " << pool
                        << ", type: kwok}\nstatus:\n  allocatable: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n"
                           "  capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n";
    created_ = dev_k8s().kubectl("create -f " + path + " 2>&1").find("created") != std::string::npos;
  }
  ~AddedNode() {
    dev_k8s().kubectl("delete pods -A --field-selector spec.nodeName=" + name_ +
                      " --grace-period=0 --force --wait=true --timeout=30s 2>&1");
    dev_k8s().kubectl("delete node " + name_ + " --wait=true --timeout=30s 2>&1");
  }
  AddedNode(const AddedNode&) = delete;
  AddedNode& operator=(const AddedNode&) = delete;

  bool created() const { return created_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  bool created_ = false;
};

class KubeBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    SHOAL_NEED_DEV_K8S(dev_k8s());
    ASSERT_FALSE(agent_kubeconfig().empty()) << "the chart's ServiceAccount was not installed";
    // Every test starts from a cluster without pods.
    // Forced: a pod whose node is gone has no KWOK to confirm its end.
    dev_k8s().kubectl("delete pods --all -A --grace-period=0 --force --wait=true --timeout=30s 2>&1");
    std::string tiny = dir_.path() + "/tiny.yaml";
    std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                           "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
    std::string east = dir_.path() + "/east.yaml";
    std::ofstream(east) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
                           "spec:\n  backend: kubernetes\n  kubernetes:\n    kubeconfig: "
                        << agent_kubeconfig() << "\n    timeout: 2s\n";
    source_.init({"--cluster-config", tiny});
    east_.init({"--cluster-config", east});
    metrics_port_ = free_port();
    east_.set_config("metricsListen", "127.0.0.1:" + std::to_string(metrics_port_));
    for (AgentProcess* agent : {&source_, &east_}) {
      agent->set_config("heartbeatInterval", "300ms");
      agent->set_config("gcInterval", "1s");
      ASSERT_TRUE(agent->start()) << agent->name() << "\n" << agent->log();
    }
    ASSERT_EQ(invite(east_, source_), "");
    ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "32"; }, 20s))
        << "east advertises its 4 x 8 cpus; got " << free_cpu_at_source() << "\n" << east_.log();
  }
  void TearDown() override {
    source_.stop();
    east_.stop();
  }

  std::string free_cpu_at_source() { return advertised_free_cpu(source_, "east"); }

  // Submits `name` with `labels` (a flow mapping's body) and `spec`'s body.
  std::string submit(const std::string& name, const std::string& labels, const std::string& spec) {
    std::string path = dir_.path() + "/" + name + ".yaml";
    std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
                        << ", namespace: default, labels: {" << labels << "}}\nspec: {" << spec << "}\n";
    CommandResult result = source_.ctl({"submit", "-f", path});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    json described = describe(name);
    return described.is_null() ? "" : described["metadata"]["uid"].get<std::string>();
  }
  json describe(const std::string& name) { return source_.ctl_json({"describe", "workload", "default/" + name}); }
  std::string phase(const std::string& name) {
    json described = describe(name);
    return described.is_null() ? "" : described["status"]["phase"].get<std::string>();
  }
  // The pods of workload `uid` in the cluster, as kubectl lists them.
  json pods_of(const std::string& uid) {
    std::string out = dev_k8s().kubectl("get pods -n default -l shoal.dev/uid=" + uid + " -o json");
    json parsed = json::parse(out, nullptr, false);
    return parsed.is_discarded() ? json::array() : parsed.value("items", json::array());
  }

  // The value of `series` (its name and labels as exposed) in east's
  // /metrics; -1 when absent.
  double east_metric(const std::string& series) {
    httplib::Client client("127.0.0.1", metrics_port_);
    client.set_read_timeout(10);
    auto response = client.Get("/metrics");
    if (!response || response->status != 200) return -1;
    size_t at = response->body.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(response->body.substr(at + series.size() + 2));
  }

  TempDir dir_;
  AgentProcess source_{"source", dir_.path()};
  AgentProcess east_{"east", dir_.path()};
  int metrics_port_ = 0;
};

TEST_F(KubeBackend, AWorkloadRunsAsALabelledPodOnAKwokNodeAndItsEndIsMirrored) {
  std::string ok = submit("ok", "shoal.dev/kwok-run-for: 2s", "resources: {cpu: \"2\", memory: 1Gi}");
  ASSERT_TRUE(wait_until([&] { return phase("ok") == "Running"; }, 20s)) << describe("ok").dump(2);
  json pods = pods_of(ok);
  ASSERT_EQ(pods.size(), 1u) << pods.dump(2);
  const json& pod = pods[0];
  EXPECT_EQ(pod["metadata"]["labels"]["shoal.dev/cluster"], "east");
  EXPECT_EQ(pod["metadata"]["labels"]["shoal.dev/epoch"], std::to_string(describe("ok")["status"]["epoch"].get<int>()));
  std::string node = pod["spec"]["nodeName"];
  EXPECT_EQ(node.rfind("kwok-node-", 0), 0u) << node;
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"], "2");
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "busybox:1.36") << "the cluster's default image";
  EXPECT_EQ(describe("ok")["status"]["nodes"][0], node) << "the node the agent reserved is the pod's";
  ASSERT_TRUE(wait_until([&] { return phase("ok") == "Succeeded"; }, 20s)) << describe("ok").dump(2);
  // What the API server answered, as /metrics tells an operator.
  EXPECT_GE(east_metric(R"(shoal_backend_api_request_duration_seconds_count{verb="POST",code="201"})"), 1)
      << "its pod's create";
  EXPECT_GE(east_metric(R"(shoal_backend_api_request_duration_seconds_count{verb="LIST",code="200"})"), 3)
      << "our pods, others' pods and the nodes";
  EXPECT_EQ(east_metric("shoal_backend_api_lists_total"), 3) << "listed once each, then watched";
  EXPECT_EQ(east_metric("shoal_backend_api_creates_refused_total"), 0);

  submit("three", "shoal.dev/kwok-run-for: 1s, shoal.dev/kwok-exit-code: \"3\"", "resources: {cpu: \"1\"}");
  ASSERT_TRUE(wait_until([&] { return phase("three") == "Failed"; }, 20s)) << describe("three").dump(2);
  json three = describe("three");
  EXPECT_EQ(three["status"]["exitCode"], 3);
  EXPECT_EQ(three["status"]["restarts"], 0);
  EXPECT_EQ(three["status"]["disruptions"], 0) << "its own exit code, not placed again";
}

// KWOK runs no container: every pod's log is the lines of the dev
// cluster's pod-output.log, served where a kubelet would serve them. What is
// tested is the path: shoalctl at the source, the peer link, the target's
// read of pods/log through its API server, and the answer back.
TEST_F(KubeBackend, LogsAtTheSourceReadThePodsLogThroughItsApiServer) {
  std::string line = "written for " + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::ofstream(dev_k8s().dir() + "/pod-output.log", std::ios::app)
      << "2026-11-27T10:00:00.000000000Z stdout F " << line << "\n";
  submit("talk", "", "resources: {cpu: \"1\"}");
  ASSERT_TRUE(wait_until([&] { return phase("talk") == "Running"; }, 20s)) << describe("talk").dump(2);
  CommandResult all = source_.ctl({"logs", "default/talk"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("KWOK runs no container"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find(line + "\n"), std::string::npos) << all.out;
  CommandResult tail = source_.ctl({"logs", "default/talk", "--tail", "1"});
  ASSERT_EQ(tail.exit_code, 0) << tail.err;
  EXPECT_EQ(tail.out, line + "\n");

  // A pod that ended: the whole output, and a follower that stops.
  submit("done", "shoal.dev/kwok-run-for: 1s", "resources: {cpu: \"1\"}");
  ASSERT_TRUE(wait_until([&] { return phase("done") == "Succeeded"; }, 20s)) << describe("done").dump(2);
  CommandResult followed = source_.ctl({"logs", "default/done", "-f"});
  ASSERT_EQ(followed.exit_code, 0) << followed.err;
  EXPECT_EQ(followed.out, all.out);

  // A replica it does not have is refused by name.
  CommandResult wrong = source_.ctl({"logs", "default/talk", "--replica", "3"});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("replica: expected"), std::string::npos) << wrong.err;
}

// The source's own cluster (sim) runs no images: the workload goes to east,
// whose pod runs the image the workload names.
TEST_F(KubeBackend, AWorkloadsOwnImageIsItsPodsAndOnlyAClusterThatRunsImagesTakesIt) {
  std::string uid = submit("imaged", "", "resources: {cpu: 50m}, image: \"registry.local/acme/app:7\"");
  ASSERT_TRUE(wait_until([&] { return phase("imaged") == "Running"; }, 20s)) << describe("imaged").dump(2);
  EXPECT_EQ(describe("imaged")["status"]["cluster"], "east") << describe("imaged").dump(2);
  json pods = pods_of(uid);
  ASSERT_EQ(pods.size(), 1u) << pods.dump(2);
  EXPECT_EQ(pods[0]["spec"]["containers"][0]["image"], "registry.local/acme/app:7");
  // Kept to the source's own cluster, it is never run there.
  submit("imaged-here", "", "resources: {cpu: 50m}, image: \"registry.local/acme/app:7\", placement: {clusters: [source]}");
  ASSERT_TRUE(wait_until([&] {
    json here = describe("imaged-here");
    return !here.is_null() && here["status"].value("reason", "").find("spec.image") != std::string::npos;
  }, 20s)) << describe("imaged-here").dump(2);
  EXPECT_EQ(phase("imaged-here"), "Pending");
}

// A node that joins while the agent runs (the nodes watch sees it) is
// advertised within a heartbeat and work selecting it lands there.
TEST_F(KubeBackend, ANodeThatJoinsWhileTheAgentRunsIsAdvertisedAndUsed) {
  AddedNode joined(dir_.path(), "joined");
  ASSERT_TRUE(joined.created());
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "40"; }, 20s))
      << "4 x 8 cpus and the joined node's 8; advertised " << free_cpu_at_source();
  std::string uid = submit("there", "", "resources: {cpu: \"8\"}, nodeSelector: {pool: joined}");
  ASSERT_TRUE(wait_until([&] { return pods_of(uid).size() == 1; }, 20s)) << describe("there").dump(2);
  EXPECT_EQ(pods_of(uid)[0]["spec"]["nodeName"], "kwok-node-joined");
}

TEST_F(KubeBackend, DeleteAtTheSourceDeletesThePod) {
  std::string uid = submit("long", "", "resources: {cpu: \"1\"}");
  ASSERT_TRUE(wait_until([&] { return phase("long") == "Running"; }, 20s)) << describe("long").dump(2);
  ASSERT_EQ(pods_of(uid).size(), 1u);
  ASSERT_EQ(source_.ctl({"delete", "workload", "default/long"}).exit_code, 0);
  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return pods_of(uid).empty(); }, 10s)) << pods_of(uid).dump(2);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << "the pod is deleted within 2 s";
}

// A pod deleted behind the agent's back is not the job's own end: the
// source counts a disruption and keeps away from the cluster that ended it
// (the only one here), never reporting the work Failed.
TEST_F(KubeBackend, APodDeletedAtTheClusterIsAnEvictionThatTheSourcePlacesAgain) {
  std::string uid = submit("evicted", "", "resources: {cpu: \"1\"}");
  ASSERT_TRUE(wait_until([&] { return phase("evicted") == "Running"; }, 20s)) << describe("evicted").dump(2);
  std::string pod = pods_of(uid)[0]["metadata"]["name"];
  dev_k8s().kubectl("delete pod " + pod + " --grace-period=0 2>&1");
  ASSERT_TRUE(wait_until([&] {
    json w = describe("evicted");
    return !w.is_null() && w["status"]["disruptions"] == 1;
  }, 20s)) << describe("evicted").dump(2);
  json described = describe("evicted");
  EXPECT_NE(described["status"]["phase"], "Failed");
  EXPECT_EQ(described["status"]["restarts"], 0);
  bool told = false;
  for (const auto& event : described["events"]) {
    told |= event["text"].get<std::string>().find("Evicted at east") != std::string::npos;
  }
  EXPECT_TRUE(told) << described["events"].dump(2);
}

// With no disruption to spare, a pod deleted at the cluster ends its
// workload Failed (TooManyDisruptions) instead of Pending for a new round.
TEST_F(KubeBackend, APodDeletedPastTheWorkloadsMaxDisruptionsEndsItFailedNotPendingAgain) {
  std::string uid = submit("fragile", "", "resources: {cpu: \"1\"}, maxDisruptions: 0");
  ASSERT_TRUE(wait_until([&] { return phase("fragile") == "Running"; }, 20s)) << describe("fragile").dump(2);
  std::string pod = pods_of(uid)[0]["metadata"]["name"];
  dev_k8s().kubectl("delete pod " + pod + " --grace-period=0 2>&1");
  ASSERT_TRUE(wait_until([&] { return phase("fragile") == "Failed"; }, 20s)) << describe("fragile").dump(2);
  json described = describe("fragile");
  EXPECT_EQ(described["status"]["disruptions"], 1);
  std::string reason = described["status"].value("reason", "");
  EXPECT_EQ(reason.rfind("TooManyDisruptions: 1 ends not its own, more than its maxDisruptions (0); "
                         "the last: Evicted at east", 0),
            0u)
      << described.dump(2);
  bool told = false;
  for (const auto& event : described["events"]) {
    told |= event["text"].get<std::string>().find("Failed, not placed again: TooManyDisruptions") != std::string::npos;
  }
  EXPECT_TRUE(told) << described["events"].dump(2);
}

TEST_F(KubeBackend, ARestartedTargetReadoptsItsPodWhichFinishesOnce) {
  std::string uid = submit("steady", "shoal.dev/kwok-run-for: 6s", "resources: {cpu: \"1\"}");
  ASSERT_TRUE(wait_until([&] { return phase("steady") == "Running"; }, 20s)) << describe("steady").dump(2);
  std::string first = pods_of(uid)[0]["metadata"]["uid"];
  east_.kill_hard();
  ASSERT_TRUE(east_.start()) << east_.log();
  ASSERT_TRUE(wait_until([&] { return phase("steady") == "Succeeded"; }, 30s)) << describe("steady").dump(2);
  json pods = pods_of(uid);
  ASSERT_EQ(pods.size(), 1u) << "one pod for the copy, never a second\n" << pods.dump(2);
  EXPECT_EQ(pods[0]["metadata"]["uid"], first) << "the same pod, re-adopted";
  EXPECT_EQ(describe("steady")["status"]["restarts"], 0);
}

// A node whose allocatable shrank below what runs on it while the agent was
// down: the restarted agent holds the running pod as before (refused, the
// copy would be lost and placed again while its pod still ran), gives the
// node nothing new until that pod has left room, and then uses the room
// the node has now.
TEST_F(KubeBackend, APodOnANodeThatShrankWhileTheAgentWasDownKeepsRunningThere) {
  AddedNode shrinks(dir_.path(), "shrinks");
  ASSERT_TRUE(shrinks.created());
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "40"; }, 20s))
      << "4 x 8 cpus and the new node's 8; advertised " << free_cpu_at_source();
  std::string uid = submit("held", "", "resources: {cpu: \"6\"}, nodeSelector: {pool: shrinks}");
  ASSERT_TRUE(wait_until([&] { return phase("held") == "Running"; }, 20s)) << describe("held").dump(2);
  std::string pod = pods_of(uid)[0]["metadata"]["uid"];

  east_.kill_hard();
  std::string patched = dev_k8s().kubectl(
      "patch node kwok-node-shrinks --subresource=status --type=merge -p "
      "'{\"status\":{\"allocatable\":{\"cpu\":\"4\"},\"capacity\":{\"cpu\":\"4\"}}}' 2>&1");
  ASSERT_NE(patched.find("patched"), std::string::npos) << patched;
  ASSERT_TRUE(east_.start()) << east_.log();
  // The other nodes' 32 cpus, and none of the shrunk node's 4: its 6-cpu
  // pod still runs there.
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "32"; }, 20s))
      << "advertised " << free_cpu_at_source() << "\n" << east_.log();
  json described = describe("held");
  EXPECT_EQ(described["status"]["phase"], "Running") << described.dump(2);
  EXPECT_EQ(described["status"]["disruptions"], 0) << described.dump(2);
  json pods = pods_of(uid);
  ASSERT_EQ(pods.size(), 1u) << pods.dump(2);
  EXPECT_EQ(pods[0]["metadata"]["uid"], pod) << "the same pod, re-adopted";

  // Until the held pod is gone, the node has no room: east says so.
  std::string next_uid = submit("next", "", "resources: {cpu: \"2\"}, nodeSelector: {pool: shrinks}");
  ASSERT_TRUE(wait_until([&] {
    json next = describe("next");
    return !next.is_null() && next["status"].value("reason", "").find("east=") != std::string::npos;
  }, 20s)) << describe("next").dump(2);
  EXPECT_EQ(phase("next"), "Pending");
  EXPECT_TRUE(pods_of(next_uid).empty()) << pods_of(next_uid).dump(2);
  ASSERT_EQ(source_.ctl({"delete", "workload", "default/held"}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return phase("next") == "Running"; }, 30s)) << describe("next").dump(2);
  EXPECT_EQ(pods_of(next_uid)[0]["spec"]["nodeName"], "kwok-node-shrinks");
}

// Two Kubernetes clusters behind two agents: when local users take all of
// east, the source's next workload runs at west.
TEST_F(KubeBackend, WorkGoesToTheOtherClusterWhenLocalPodsTakeEveryNodeOfOne) {
  ASSERT_FALSE(other_k8s().kubeconfig().empty()) << "the second dev cluster did not come up";
  std::string manifest = dir_.path() + "/west.yaml";
  std::ofstream(manifest) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: west}\n"
                             "spec:\n  backend: kubernetes\n  kubernetes:\n    kubeconfig: "
                          << other_k8s().kubeconfig() << "\n";
  AgentProcess west{"west", dir_.path()};
  west.init({"--cluster-config", manifest});
  west.set_config("heartbeatInterval", "300ms");
  ASSERT_TRUE(west.start()) << west.log();
  ASSERT_EQ(invite(west, source_), "");
  for (int node = 0; node < 4; ++node) {
    std::ofstream(dir_.path() + "/local.json")
        << "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"local-" << node
        << "\"},\"spec\":{\"nodeName\":\"kwok-node-" << node
        << "\",\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"8\"}}}]}}";
    ASSERT_NE(dev_k8s().kubectl("apply -f " + dir_.path() + "/local.json 2>&1").find("created"), std::string::npos);
  }
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "0"; }, 10s)) << free_cpu_at_source();
  std::string uid = submit("elsewhere", "", "resources: {cpu: \"1\"}");
  ASSERT_TRUE(wait_until([&] { return phase("elsewhere") == "Running"; }, 20s)) << describe("elsewhere").dump(2);
  EXPECT_EQ(describe("elsewhere")["status"]["cluster"], "west");
  std::string pods = other_k8s().kubectl("get pods -n default -l shoal.dev/uid=" + uid + " -o name");
  EXPECT_NE(pods.find("pod/shoal-"), std::string::npos) << "the pod runs in west's cluster: " << pods;
  EXPECT_TRUE(pods_of(uid).empty()) << "and not in east's";
  dev_k8s().kubectl("delete pod local-0 local-1 local-2 local-3 --grace-period=0 2>&1");
  west.stop();
}

TEST_F(KubeBackend, PodsLocalUsersCreateShrinkTheAdvertisedRoom) {
  // Every node's cpu taken by pods made straight in the cluster, not by shoal.
  for (int node = 0; node < 4; ++node) {
    std::string pod = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"local-" + std::to_string(node) +
                      "\"},\"spec\":{\"nodeName\":\"kwok-node-" + std::to_string(node) +
                      "\",\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"requests\":{\"cpu\":\"8\"}}}]}}";
    std::ofstream(dir_.path() + "/local.json") << pod;
    std::string out = dev_k8s().kubectl("apply -f " + dir_.path() + "/local.json 2>&1");
    ASSERT_NE(out.find("created"), std::string::npos) << out;
  }
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "0"; }, 10s))
      << "advertised free cpu: " << free_cpu_at_source();
  dev_k8s().kubectl("delete pod local-0 local-1 local-2 local-3 --grace-period=0 2>&1");
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "32"; }, 10s))
      << "advertised free cpu: " << free_cpu_at_source();
}

// Pods of the cluster's own that the API server accepts but that are odd:
// memory "100m" (counted as Kubernetes rounds it: 1 byte), an extended
// resource the agent does not know, no requests at all, and a quantity
// beyond what the agent can hold (left out, and said in `status`). None
// keeps work from the cluster; the room of those it can read is counted.
TEST_F(KubeBackend, OddPodsOfTheClustersOwnNeitherBlindTheAgentNorGoUncounted) {
  dev_k8s().create_odd_pods("kwok-node-0");
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "30"; }, 10s))
      << "the two readable pods' 2 cpus are counted; advertised: " << free_cpu_at_source() << "\n" << east_.log();
  // Seen by the watch above; by the list, when east starts again. The
  // source still holds what the east before the restart advertised, so
  // east's own word comes first: healthy once its backend has listed.
  east_.stop();
  ASSERT_TRUE(east_.start()) << east_.log();
  json status;
  ASSERT_TRUE(wait_until(
      [&] {
        status = east_.ctl_json({"status"});
        return !status.is_null() && status["backend"].value("healthy", false);
      },
      20s))
      << status.dump(2) << "\n" << east_.log();
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "30"; }, 20s))
      << "listed: advertised " << free_cpu_at_source() << "\n" << east_.log();
  json warnings = status["backend"].value("warnings", json::array());
  ASSERT_EQ(warnings.size(), 1u) << status.dump(2);
  EXPECT_NE(warnings[0].get<std::string>().find("default/huge"), std::string::npos) << warnings.dump();
  EXPECT_NE(warnings[0].get<std::string>().find("resources.requests.memory"), std::string::npos) << warnings.dump();
  EXPECT_NE(east_.ctl({"status"}).out.find("backend warning: 1 pods"), std::string::npos);

  submit("beside", "", "resources: {cpu: \"1\"}");
  EXPECT_TRUE(wait_until([&] { return phase("beside") == "Running"; }, 20s)) << describe("beside").dump(2);
  dev_k8s().kubectl("delete pod tiny-memory extended no-requests huge --grace-period=0 --force 2>&1");
  EXPECT_TRUE(wait_until([&] { return east_.ctl_json({"status"})["backend"].value("warnings", json::array()).empty(); },
                         10s));
}

// The agent runs with the chart's ServiceAccount: it may do what the
// backend does and nothing more.
TEST_F(KubeBackend, TheChartsServiceAccountMayDoWhatTheBackendDoesAndNoMore) {
  const std::string as = " --as system:serviceaccount:shoal-system:shoal 2>/dev/null";
  auto can = [&](const std::string& what) {
    std::string answer = dev_k8s().kubectl("auth can-i " + what + as);
    return answer.rfind("yes", 0) == 0;
  };
  EXPECT_TRUE(can("list nodes"));
  EXPECT_TRUE(can("watch pods --all-namespaces"));
  EXPECT_TRUE(can("create pods -n default"));
  EXPECT_TRUE(can("delete pods -n default"));
  EXPECT_TRUE(can("get pods/log -n default"));
  EXPECT_FALSE(can("get secrets -n default"));
  EXPECT_FALSE(can("list secrets --all-namespaces"));
  EXPECT_FALSE(can("create pods -n kube-system")) << "only in the namespaces it runs work in";
  EXPECT_FALSE(can("patch nodes"));
  EXPECT_FALSE(can("delete nodes"));
  EXPECT_FALSE(can("create deployments -n default"));
}

TEST_F(KubeBackend, CordonedNodesGetNoPodsAndWorkBiggerThanAnyNodeIsUnschedulable) {
  dev_k8s().kubectl("cordon kwok-node-0 kwok-node-1 kwok-node-2 2>&1");
  struct Uncordon {
    ~Uncordon() { dev_k8s().kubectl("uncordon kwok-node-0 kwok-node-1 kwok-node-2 2>&1"); }
  } uncordon;
  ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "8"; }, 10s))
      << "only kwok-node-3 may take work; advertised " << free_cpu_at_source();
  std::vector<std::string> uids;
  for (const char* name : {"a", "b", "c"}) uids.push_back(submit(name, "", "resources: {cpu: \"2\"}"));
  for (const std::string& uid : uids) {
    ASSERT_TRUE(wait_until([&] { return pods_of(uid).size() == 1; }, 20s)) << uid;
    EXPECT_EQ(pods_of(uid)[0]["spec"]["nodeName"], "kwok-node-3");
  }
  submit("huge", "", "resources: {cpu: \"9\"}");
  ASSERT_TRUE(wait_until([&] {
    json huge = describe("huge");
    return !huge.is_null() && huge["status"].value("reason", "").find("east=") != std::string::npos;
  }, 20s)) << describe("huge").dump(2);
  json huge = describe("huge");
  EXPECT_EQ(huge["status"]["phase"], "Pending");
  EXPECT_NE(huge["status"]["reason"].get<std::string>().find("Unschedulable"), std::string::npos)
      << huge["status"]["reason"];
}

// The API server stops answering (SIGSTOP): the agent keeps serving its CLI
// and its peers, refuses new candidates BackendUnavailable, and recovers by
// itself once the server answers again.
TEST_F(KubeBackend, AnApiServerThatStopsAnsweringMakesTheAgentRefuseCandidatesAndItRecovers) {
  std::string pid_file = dev_k8s().dir() + "/run/kube-apiserver.pid";
  std::string pid = run_shell("cat " + pid_file);
  while (!pid.empty() && pid.back() == '\n') pid.pop_back();
  ASSERT_FALSE(pid.empty());
  run_shell("kill -STOP " + pid);
  struct Resume {
    std::string pid;
    ~Resume() { run_shell("kill -CONT " + pid); }
  } resume{pid};
  auto backend_healthy = [&] {
    json status = east_.ctl_json({"status"});
    return !status.is_null() && status["backend"]["healthy"].get<bool>();
  };
  ASSERT_TRUE(wait_until([&] { return !backend_healthy(); }, 15s)) << "east never noticed";
  EXPECT_NE(east_.ctl_json({"status"})["backend"]["error"].get<std::string>().find("kube-apiserver"),
            std::string::npos);
  submit("waits", "", "resources: {cpu: \"1\"}");
  ASSERT_TRUE(wait_until([&] {
    json w = describe("waits");
    return !w.is_null() && w["status"].value("reason", "").find("BackendUnavailable") != std::string::npos;
  }, 30s)) << describe("waits").dump(2);
  EXPECT_EQ(phase("waits"), "Pending");
  // The agent still answers its CLI and its peers.
  EXPECT_EQ(east_.ctl({"status"}).exit_code, 0);
  json peers = east_.ctl_json({"peers"});
  ASSERT_FALSE(peers.is_null());
  EXPECT_EQ(peers["items"][0]["state"], "Active");
  run_shell("kill -CONT " + pid);
  ASSERT_TRUE(wait_until(backend_healthy, 15s)) << "east never recovered";
  ASSERT_TRUE(wait_until([&] { return phase("waits") == "Running"; }, 60s)) << describe("waits").dump(2);
}

}  // namespace
}  // namespace shoal::testing
