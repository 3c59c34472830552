// The kubernetes backend through an API server that misbehaves as busy
// production ones do (kube_fault_proxy.h): hundreds of workloads from a
// source through a target whose every call to kube-apiserver passes a
// proxy that throttles, refuses, loses answers and cuts watches, beside
// pods of the cluster's own with odd quantities. Every copy's pod is
// created once, nothing is lost or left behind, and a create given up is
// failed only once its pod is known gone.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/time.h"
#include "dev_k8s.h"
#include "harness.h"
#include "kube_fault_proxy.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

DevK8s& dev_k8s() {
  static DevK8s cluster;
  return cluster;
}
std::string& agent_kubeconfig() {
  static std::string path;
  return path;
}
const auto* const kDevK8s =
    ::testing::AddGlobalTestEnvironment(new DevK8sEnvironment(dev_k8s(), 4, 8, &agent_kubeconfig()));

constexpr int kWorkloads = 300;

TEST(KubeFaults, EveryCopysPodIsCreatedOnceAndNothingIsLostOrLeftBehindThroughAMisbehavingApiServer) {
  SHOAL_NEED_DEV_K8S(dev_k8s());
  ASSERT_FALSE(agent_kubeconfig().empty()) << "the chart's ServiceAccount was not installed";
  TempDir dir;
  // The cluster's own pods, which the agent must read as Kubernetes does,
  // one of them beyond what it can read at all.
  dev_k8s().create_odd_pods("kwok-node-3");

  // East reaches the API server only through the proxy.
  std::ifstream in(agent_kubeconfig());
  std::stringstream text;
  text << in.rdbuf();
  std::smatch server;
  std::string config = text.str();
  ASSERT_TRUE(std::regex_search(config, server, std::regex("server: \"?https://127\\.0\\.0\\.1:([0-9]+)\"?")));
  KubeFaultProxy proxy("127.0.0.1", std::stoi(server[1]), 2s, /*seed=*/20261129);
  config = std::regex_replace(config, std::regex("server: \"?https://127\\.0\\.0\\.1:[0-9]+\"?"),
                              "server: http://127.0.0.1:" + std::to_string(proxy.port()));
  std::string kubeconfig = dir.path() + "/through-proxy.kubeconfig";
  std::ofstream(kubeconfig) << config;

  AgentProcess source{"source", dir.path()};
  AgentProcess east{"east", dir.path()};
  AgentProcess west{"west", dir.path()};  // a small sim cluster: where a copy east ended goes next
  std::string tiny = dir.path() + "/tiny.yaml";
  std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                         "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
  std::string manifest = dir.path() + "/east.yaml";
  std::ofstream(manifest) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
                             "spec:\n  backend: kubernetes\n  kubernetes:\n    kubeconfig: "
                          << kubeconfig << "\n    timeout: 2s\n";
  std::string small = dir.path() + "/west.yaml";
  std::ofstream(small) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: west}\n"
                          "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: \"1\", memory: 1Gi}}\n";
  source.init({"--cluster-config", tiny});
  east.init({"--cluster-config", manifest});
  west.init({"--cluster-config", small});
  east.set_config("exec", "{keepFinished: 2s}");
  for (AgentProcess* agent : {&source, &east, &west}) {
    agent->set_config("heartbeatInterval", "300ms");
    agent->set_config("gcInterval", "1s");
    ASSERT_TRUE(agent->start()) << agent->name() << "\n" << agent->log();
  }
  ASSERT_EQ(invite(east, source), "");
  ASSERT_TRUE(wait_until([&] { return !advertised_free_cpu(source, "east").empty(); }, 60s)) << east.log();

  // One workload whose first copy's creates are never answered (placed
  // again at west, as a source keeps away from a target that ended a copy),
  // then the rest, all at east.
  std::string path = dir.path() + "/workloads.yaml";
  {
    std::ofstream out(path);
    for (int i = 0; i <= kWorkloads; ++i) {
      std::string name = i == 0 ? "unanswered" : "w" + std::to_string(i);
      out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
          << ", namespace: default, labels: {shoal.dev/kwok-run-for: 1s"
          << (i == 0 ? std::string(", ") + KubeFaultProxy::kNoAnswerLabel + ": \"1\"" : "")
          << "}}\nspec: {resources: {cpu: 500m, memory: 64Mi}, placement: {clusters: ["
          << (i == 0 ? "east, west" : "east") << "]}" << (i == 0 ? ", restartPolicy: Never" : "") << "}\n";
    }
  }
  CommandResult submitted = source.ctl({"submit", "-f", path});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  // West takes work once the unanswered copy is east's.
  ASSERT_TRUE(wait_until([&] {
    json unanswered = source.ctl_json({"describe", "workload", "default/unanswered"});
    return !unanswered.is_null() && unanswered["status"].value("cluster", "") == "east";
  }, 60s));
  ASSERT_EQ(invite(west, source), "");

  json last;
  auto all_succeeded = [&] {
    last = source.ctl_json({"get", "workloads", "-A"});
    if (last.is_null() || last["items"].size() != kWorkloads + 1) return false;
    for (const json& item : last["items"]) {
      if (item["status"].value("phase", "") != "Succeeded") return false;
    }
    return true;
  };
  auto started = std::chrono::steady_clock::now();
  auto seconds_since = [&](std::chrono::steady_clock::time_point from) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
  };
  bool others_done = wait_until([&] {
    if (!all_succeeded()) {
      int succeeded = 0;
      for (const json& item : last["items"]) succeeded += item["status"].value("phase", "") == "Succeeded";
      return succeeded >= kWorkloads;
    }
    return true;
  }, 420s);
  double others_took = seconds_since(started);
  bool done = others_done && wait_until(all_succeeded, 420s);
  double all_took = seconds_since(started);
  std::map<std::string, int> phases;
  for (const json& item : last["items"]) ++phases[item["status"].value("phase", "")];
  std::string seen;
  for (const auto& [phase, n] : phases) seen += phase + "=" + std::to_string(n) + " ";
  ASSERT_TRUE(done) << "not every workload succeeded: " << seen << "\n" << east.log().substr(0, 20000);

  // Each copy placed had its pod created once by the API server, and the
  // pod of the copy that succeeded was created.
  std::map<std::string, KubeFaultProxy::PodHistory> pods = proxy.pods();
  std::map<std::string, std::set<std::string>> epochs_created;  // by uid
  for (const auto& [name, history] : pods) {
    EXPECT_LE(history.created, 1) << "pod " << name << " was created " << history.created << " times";
    if (history.created > 0) epochs_created[history.uid].insert(history.epoch);
  }
  int disruptions = 0;
  std::string unanswered_uid;
  for (const json& item : last["items"]) {
    std::string uid = item["metadata"]["uid"];
    std::string epoch = std::to_string(item["status"].value("epoch", 0));
    disruptions += item["status"].value("disruptions", 0);
    if (item["status"].value("cluster", "") == "east") {
      EXPECT_TRUE(epochs_created[uid].count(epoch)) << item["metadata"]["name"] << " succeeded at epoch " << epoch
                                                    << " whose pod the API server never created";
    }
    if (item["metadata"]["name"] == "unanswered") unanswered_uid = uid;
  }

  // The copy whose creates were never answered was failed (and placed
  // again) only once a delete had found its pod gone.
  const KubeFaultProxy::PodHistory* first = nullptr;
  for (const auto& [name, history] : pods) {
    if (history.uid == unanswered_uid && history.epoch == "1") first = &history;
  }
  ASSERT_NE(first, nullptr) << "the unanswered workload's first pod was never asked for";
  EXPECT_EQ(first->created, 0);
  ASSERT_NE(first->found_gone, std::chrono::system_clock::time_point{}) << "no delete ever found it gone";
  json unanswered = source.ctl_json({"describe", "workload", "default/unanswered"});
  EXPECT_EQ(unanswered["status"].value("cluster", ""), "west") << unanswered.dump(2);
  EXPECT_EQ(unanswered["status"].value("disruptions", 0), 1) << unanswered.dump(2);
  std::string failed_at;
  for (const json& event : unanswered["events"]) {
    if (event.value("text", "").rfind("Failed at east", 0) == 0) failed_at = event.value("at", "");
  }
  Result<TimePoint> failed = parse_time(failed_at, "at");
  ASSERT_TRUE(failed.is_ok()) << "no end at east in its history: " << unanswered.dump(2);
  EXPECT_GE(std::chrono::duration_cast<std::chrono::milliseconds>(failed->time_since_epoch()).count(),
            std::chrono::duration_cast<std::chrono::milliseconds>(first->found_gone.time_since_epoch()).count())
      << "its copy failed before its pod was known gone";

  // Nothing left behind: once the copies are forgotten and keepFinished
  // has passed, none of east's pods remain.
  auto ours_left = [&] {
    json listed = json::parse(dev_k8s().kubectl("get pods -A -l shoal.dev/cluster=east -o json"), nullptr, false);
    return listed.is_discarded() ? -1 : static_cast<int>(listed.value("items", json::array()).size());
  };
  auto sweep_started = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_until([&] { return ours_left() == 0; }, 180s)) << ours_left() << " of east's pods left behind";
  double sweep_took = seconds_since(sweep_started);

  // Every fault was met, and the backend came through healthy.
  std::map<std::string, int> injected = proxy.injected();
  for (const char* fault : {"create-429", "create-503", "create-answer-lost", "create-timeout", "create-no-answer",
                            "delete-429", "list-503", "watch-410", "watch-cut", "delete-no-answer-503"}) {
    EXPECT_GT(injected[fault], 0) << fault << " was never injected";
  }
  // A list the proxy refused leaves it unhealthy until the next one,
  // after a backoff: it recovers by itself.
  json status;
  EXPECT_TRUE(wait_until([&] {
    status = east.ctl_json({"status"});
    return !status.is_null() && status["backend"].value("healthy", false);
  }, 60s)) << status.dump();
  std::string faults;
  for (const auto& [fault, n] : injected) faults += fault + "=" + std::to_string(n) + " ";
  std::printf("faults injected: %s\nworkloads: %d, disruptions: %d, pods created: %zu; %d succeeded in %.0f s, "
              "all in %.0f s, pods gone %.0f s later\n",
              faults.c_str(), kWorkloads + 1, disruptions, pods.size(), kWorkloads, others_took, all_took, sweep_took);
  source.stop();
  east.stop();
  west.stop();
}

}  // namespace
}  // namespace shoal::testing
