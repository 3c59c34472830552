// KubeClient against a real kube-apiserver (the dev cluster of
// scripts/k8s-dev.sh): nodes listed, a pod created once (a second create is
// AlreadyExists) and watched through its phases to its exit code, a token
// the server does not know refused, and a server that does not answer
// reported Unavailable within the timeout.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "agent/cluster/kubernetes/kube_api.h"
#include "dev_k8s.h"

namespace shoal::cluster::kubernetes {
namespace {

using namespace std::chrono_literals;
using shoal::testing::DevK8s;

DevK8s& dev_k8s() {
  static DevK8s cluster;
  return cluster;
}
class DevK8sEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (shoal::testing::dev_k8s_unavailable().empty()) dev_k8s().up(2, 8);
  }
  void TearDown() override {
    std::string out;
    std::vector<std::string> left = dev_k8s().down(&out);
    EXPECT_TRUE(left.empty()) << left.size() << " processes of the dev cluster left behind:\n" << out;
  }
};
const auto* const kDevK8s = ::testing::AddGlobalTestEnvironment(new DevK8sEnvironment);

class KubeApiLive : public ::testing::Test {
 protected:
  void SetUp() override {
    SHOAL_NEED_DEV_K8S(dev_k8s());
    auto config = load_kubeconfig(dev_k8s().kubeconfig());
    ASSERT_TRUE(config.is_ok()) << config.status().message();
    config_ = *config;
  }
  KubeClient client(std::chrono::milliseconds timeout = 5s) { return KubeClient({config_, timeout}); }
  KubeConfig config_;
};

constexpr const char* kPod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"exit3","namespace":"default",
  "labels":{"shoal.dev/test":"live","shoal.dev/kwok-run-for":"1s","shoal.dev/kwok-exit-code":"3"}},
  "spec":{"nodeName":"kwok-node-1","restartPolicy":"Never","automountServiceAccountToken":false,
  "containers":[{"name":"main","image":"none","resources":{"requests":{"cpu":"2","memory":"1Gi"}}}]}})";

TEST_F(KubeApiLive, NodesAreListedAndAPodIsCreatedOnceAndWatchedToItsExitCode) {
  KubeClient api = client();
  auto nodes = api.call("GET", "/api/v1/nodes");
  ASSERT_TRUE(nodes.is_ok()) << nodes.status().message();
  ASSERT_EQ(nodes->status, 200) << nodes->body;
  auto list = parse_node_list(nodes->body);
  ASSERT_TRUE(list.is_ok()) << list.status().message();
  ASSERT_EQ(list->items.size(), 2u);
  for (const KubeNode& node : list->items) {
    EXPECT_TRUE(node.usable()) << node.name;
    EXPECT_EQ(node.allocatable.cpu_milli, 8000);
  }

  auto pods = api.call("GET", "/api/v1/namespaces/default/pods?labelSelector=shoal.dev%2Ftest%3Dlive");
  ASSERT_TRUE(pods.is_ok()) << pods.status().message();
  auto before = parse_pod_list(pods->body);
  ASSERT_TRUE(before.is_ok()) << before.status().message();
  EXPECT_TRUE(before->items.empty());

  auto created = api.call("POST", "/api/v1/namespaces/default/pods", kPod);
  ASSERT_TRUE(created.is_ok()) << created.status().message();
  ASSERT_EQ(created->status, 201) << created->body;
  auto again = api.call("POST", "/api/v1/namespaces/default/pods", kPod);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->status, 409);
  EXPECT_NE(kube_status_message(again->body).find("already exists"), std::string::npos) << again->body;

  // From the list's resourceVersion: every change since, in order.
  std::vector<std::string> phases;
  int32_t exit_code = -1;
  std::string watch_error;
  Status watched = client().watch(
      "/api/v1/namespaces/default/pods?watch=1&labelSelector=shoal.dev%2Ftest%3Dlive&resourceVersion=" +
          before->resource_version,
      [&](std::string_view line) {
        auto event = parse_pod_event(line);
        if (!event.is_ok()) {
          watch_error = event.status().message();
          return false;
        }
        if (!event->pod) return true;
        if (phases.empty() || phases.back() != event->pod->phase) phases.push_back(event->pod->phase);
        exit_code = event->pod->exit_code;
        return !event->pod->terminal();
      },
      30s);
  ASSERT_TRUE(watched.is_ok()) << watched.message();
  ASSERT_TRUE(watch_error.empty()) << watch_error;
  ASSERT_FALSE(phases.empty());
  EXPECT_EQ(phases.back(), "Failed");
  EXPECT_NE(std::find(phases.begin(), phases.end(), "Running"), phases.end());
  EXPECT_EQ(exit_code, 3);

  auto deleted = api.call("DELETE", "/api/v1/namespaces/default/pods/exit3");
  ASSERT_TRUE(deleted.is_ok());
  EXPECT_EQ(deleted->status, 200) << deleted->body;
}

TEST_F(KubeApiLive, ATokenTheServerDoesNotKnowIsRefused) {
  KubeConfig stranger = config_;
  stranger.token = "not-a-token";
  KubeClient api({stranger, 5s});
  auto answer = api.call("GET", "/api/v1/nodes");
  ASSERT_TRUE(answer.is_ok()) << answer.status().message();
  EXPECT_EQ(answer->status, 401);
  Status watched = api.watch("/api/v1/nodes?watch=1", [](std::string_view) { return true; }, 5s);
  EXPECT_EQ(watched.code(), ErrorCode::kPermissionDenied) << watched.message();
  EXPECT_NE(watched.message().find("HTTP 401"), std::string::npos) << watched.message();
}

TEST_F(KubeApiLive, AServerSignedByAnotherCaIsRefused) {
  KubeConfig wrong_ca = config_;
  wrong_ca.ca_pem.clear();  // the system's roots do not know the dev cluster's CA
  auto answer = KubeClient({wrong_ca, 5s}).call("GET", "/api/v1/nodes");
  ASSERT_FALSE(answer.is_ok());
  EXPECT_EQ(answer.status().code(), ErrorCode::kUnavailable);
}

TEST_F(KubeApiLive, AServerThatDoesNotAnswerIsUnavailableWithinTheTimeout) {
  // A socket that accepts connections (the kernel's backlog) and never speaks.
  int silent = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(silent, 4), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);
  KubeConfig mute = config_;
  mute.server = "https://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  auto started = std::chrono::steady_clock::now();
  auto answer = KubeClient({mute, 500ms}).call("GET", "/api/v1/nodes");
  auto took = std::chrono::steady_clock::now() - started;
  close(silent);
  ASSERT_FALSE(answer.is_ok());
  EXPECT_EQ(answer.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(answer.status().message().find("GET /api/v1/nodes"), std::string::npos) << answer.status().message();
  EXPECT_LT(took, 10s) << "bounded by the timeout, not by the server";
}

}  // namespace
}  // namespace shoal::cluster::kubernetes
