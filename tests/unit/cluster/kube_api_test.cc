// The Kubernetes API's decoders on the API server's own answers (taken from
// the dev cluster, scripts/k8s-dev.sh, and trimmed), and kubeconfigs as
// kubectl writes them; each bad input is one line naming its field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/cluster/kubernetes/kube_api.h"

namespace shoal::cluster::kubernetes {
namespace {

constexpr std::string_view kNode =
    R"({"apiVersion":"v1","kind":"Node","metadata":{"labels":{"kubernetes.io/hostname":"kwok-node-0","type":"kwok"},)"
    R"("name":"kwok-node-0","resourceVersion":"192"},"spec":{},"status":{"addresses":[{"address":"127.0.0.1",)"
    R"("type":"InternalIP"}],"allocatable":{"cpu":"8","memory":"32Gi","pods":"110","nvidia.com/gpu":"2"},)"
    R"("capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"conditions":[{"status":"False","type":"MemoryPressure"},)"
    R"({"reason":"KubeletReady","status":"True","type":"Ready"}],"phase":"Running"}})";

constexpr std::string_view kFailedPod =
    R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","namespace":"default","resourceVersion":"195",)"
    R"("uid":"a0c7e776","labels":{"shoal.dev/uid":"u1"}},"spec":{"containers":[{"name":"main","image":"busybox",)"
    R"("resources":{"limits":{"cpu":"1"},"requests":{"cpu":"1","memory":"512Mi"}}},{"name":"side","image":"x",)"
    R"("resources":{"requests":{"cpu":"250m"}}}],"initContainers":[{"name":"init","resources":{"requests":)"
    R"({"cpu":"2"}}}],"nodeName":"kwok-node-0","restartPolicy":"Never"},"status":{"containerStatuses":[{"name":)"
    R"("main","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":3,"reason":"Error"}}}],)"
    R"("phase":"Failed","podIP":"10.244.0.1"}})";

// `text` with its first `from` replaced by `to`.
std::string with(std::string text, std::string_view from, std::string_view to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(KubeApiTest, ANodeListIsReadWithItsResourceVersionReadinessAndAllocatable) {
  std::string body = R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"200"},"items":[)" +
                     std::string(kNode) + "]}";
  auto list = parse_node_list(body);
  ASSERT_TRUE(list.is_ok()) << list.status().message();
  EXPECT_EQ(list->resource_version, "200");
  ASSERT_EQ(list->items.size(), 1u);
  const KubeNode& node = list->items[0];
  EXPECT_EQ(node.name, "kwok-node-0");
  EXPECT_EQ(node.labels.at("type"), "kwok");
  EXPECT_EQ(node.allocatable.cpu_milli, 8000);
  EXPECT_EQ(node.allocatable.memory_bytes, int64_t{32} << 30);
  EXPECT_EQ(node.allocatable.gpu, 2);
  EXPECT_EQ(node.allocatable_pods, 110);
  EXPECT_TRUE(node.ready);
  EXPECT_TRUE(node.usable());
}

// The effective request, as kube-scheduler and the kubelet count it: init
// containers one at a time beside the sidecars started before them, the
// containers beside every sidecar, and the pod's overhead on top.
TEST(KubeApiTest, APodTakesWhatTheSchedulerCountsSidecarsInitStepsAndOverhead) {
  auto requests_of = [](const std::string& spec) {
    auto event = parse_pod_event(
        R"({"type":"ADDED","object":{"metadata":{"name":"p","namespace":"d","resourceVersion":"1"},"spec":)" + spec +
        R"(,"status":{"phase":"Pending"}}})");
    EXPECT_TRUE(event.is_ok()) << event.status().message();
    return event.is_ok() && event->pod ? event->pod->requests : model::Resources{};
  };
  auto cpu = [](const char* milli) { return std::string(R"({"requests":{"cpu":")") + milli + R"("}})"; };
  // Two containers of 1 and 0.25 cpu; one init step of 2 cpu: the init step.
  EXPECT_EQ(requests_of(R"({"containers":[{"resources":)" + cpu("1") + R"(},{"resources":)" + cpu("250m") +
                        R"(}],"initContainers":[{"resources":)" + cpu("2") + "}]}")
                .cpu_milli,
            2000);
  // A sidecar of 0.5 cpu, then an init step of 1 cpu beside it (1.5), then
  // a container of 1.25 beside the sidecar (1.75), with 0.1 overhead.
  EXPECT_EQ(requests_of(R"({"containers":[{"resources":)" + cpu("1250m") + R"(}],"initContainers":[)"
                        R"({"restartPolicy":"Always","resources":)" + cpu("500m") + R"(},{"resources":)" + cpu("1") +
                        R"(}],"overhead":{"cpu":"100m","memory":"64Mi"}})"),
            (model::Resources{1850, int64_t{64} << 20, 0}));
  // An init step after two sidecars needs them both beside it.
  EXPECT_EQ(requests_of(R"({"containers":[{"resources":)" + cpu("100m") + R"(}],"initContainers":[)"
                        R"({"restartPolicy":"Always","resources":)" + cpu("1") + R"(},)"
                        R"({"restartPolicy":"Always","resources":)" + cpu("1") + R"(},{"resources":)" + cpu("3") +
                        "}]}")
                .cpu_milli,
            5000);
}

TEST(KubeApiTest, CordonedNotReadyOrTaintedNodesAreNotUsable) {
  std::string cordoned = with(std::string(kNode), R"("spec":{})", R"("spec":{"unschedulable":true})");
  auto node = parse_node_event(R"({"type":"MODIFIED","object":)" + cordoned + "}");
  ASSERT_TRUE(node.is_ok()) << node.status().message();
  EXPECT_TRUE(node->node->unschedulable);
  EXPECT_FALSE(node->node->usable());
  std::string tainted = with(std::string(kNode), R"("spec":{})",
                             R"("spec":{"taints":[{"key":"k","effect":"PreferNoSchedule"},{"key":"x","effect":"NoExecute"}]})");
  node = parse_node_event(R"({"type":"MODIFIED","object":)" + tainted + "}");
  ASSERT_TRUE(node.is_ok()) << node.status().message();
  EXPECT_FALSE(node->node->usable());
  // Tolerated, the NoExecute taint keeps nothing away (PreferNoSchedule never did).
  auto toleration = [](std::string key, bool exists, std::string value, std::string effect) {
    model::Toleration made;
    made.key = std::move(key);
    made.exists = exists;
    made.value = std::move(value);
    made.effect = std::move(effect);
    return std::vector<model::Toleration>{made};
  };
  EXPECT_TRUE(node->node->usable(toleration("x", true, "", "")));
  EXPECT_TRUE(node->node->usable(toleration("", true, "", "")));
  EXPECT_FALSE(node->node->usable(toleration("x", false, "v", "")));
  EXPECT_FALSE(node->node->usable(toleration("x", true, "", "NoSchedule")));
  EXPECT_FALSE(node->node->usable(toleration("k", true, "", "")));
  std::string not_ready =
      with(std::string(kNode), R"("status":"True","type":"Ready")", R"("status":"Unknown","type":"Ready")");
  node = parse_node_event(R"({"type":"ADDED","object":)" + not_ready + "}");
  ASSERT_TRUE(node.is_ok()) << node.status().message();
  EXPECT_EQ(node->type, KubeEvent::Type::kAdded);
  EXPECT_FALSE(node->node->ready);
}

TEST(KubeApiTest, APodsRequestsExitCodeAndReasonAreRead) {
  auto event = parse_pod_event(R"({"type":"MODIFIED","object":)" + std::string(kFailedPod) + "}");
  ASSERT_TRUE(event.is_ok()) << event.status().message();
  EXPECT_EQ(event->type, KubeEvent::Type::kModified);
  EXPECT_EQ(event->resource_version, "195");
  const KubePod& pod = *event->pod;
  EXPECT_EQ(pod.namespace_name, "default");
  EXPECT_EQ(pod.name, "p1");
  EXPECT_EQ(pod.labels.at("shoal.dev/uid"), "u1");
  EXPECT_EQ(pod.node_name, "kwok-node-0");
  EXPECT_EQ(pod.phase, "Failed");
  EXPECT_TRUE(pod.terminal());
  EXPECT_EQ(pod.exit_code, 3);
  EXPECT_EQ(pod.reason, "Error");
  // The containers' 1.25 cpu, but the init container's 2 is more.
  EXPECT_EQ(pod.requests.cpu_milli, 2000);
  EXPECT_EQ(pod.requests.memory_bytes, int64_t{512} << 20);
}

// An evicted pod's containers end too (Error); who ended it is the pod's reason.
TEST(KubeApiTest, APodsOwnReasonWinsOverItsContainers) {
  std::string evicted = with(std::string(kFailedPod), R"("phase":"Failed")",
                             R"("phase":"Failed","reason":"Evicted","message":"low on memory")");
  auto event = parse_pod_event(R"({"type":"MODIFIED","object":)" + evicted + "}");
  ASSERT_TRUE(event.is_ok()) << event.status().message();
  EXPECT_EQ(event->pod->reason, "Evicted");
  EXPECT_EQ(event->pod->message, "low on memory");
  EXPECT_EQ(event->pod->exit_code, 3);
}

// When a pod came to be and its grace: what a sweep of left-behind pods
// reads; unreadable or absent, they are left at "unknown" and 30 s.
TEST(KubeApiTest, APodsCreationTimeAndGraceAreRead) {
  std::string dated = with(std::string(kFailedPod), R"("uid":"a0c7e776")",
                           R"("uid":"a0c7e776","creationTimestamp":"2026-11-28T19:00:00Z")");
  dated = with(dated, R"("nodeName":"kwok-node-0")", R"("nodeName":"kwok-node-0","terminationGracePeriodSeconds":7)");
  auto event = parse_pod_event(R"({"type":"MODIFIED","object":)" + dated + "}");
  ASSERT_TRUE(event.is_ok()) << event.status().message();
  ASSERT_TRUE(event->pod->created_at.has_value());
  EXPECT_EQ(*event->pod->created_at, *parse_time("2026-11-28T19:00:00Z", "t"));
  EXPECT_EQ(event->pod->grace_seconds, 7);

  std::string odd = with(std::string(kFailedPod), R"("uid":"a0c7e776")", R"("uid":"a0c7e776","creationTimestamp":5)");
  auto plain = parse_pod_event(R"({"type":"MODIFIED","object":)" + odd + "}");
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_FALSE(plain->pod->created_at.has_value());
  EXPECT_EQ(plain->pod->grace_seconds, 30);
}

// Who is ending a pod, when the cluster says: the DisruptionTarget
// condition's reason; its deletion timestamp says someone deleted it.
TEST(KubeApiTest, ADisruptionTargetAndADeletionAreRead) {
  std::string evicted =
      with(std::string(kFailedPod), R"("phase":"Failed")",
           R"("phase":"Failed","conditions":[{"type":"Ready","status":"False"},{"type":"DisruptionTarget",)"
           R"("status":"True","reason":"EvictionByEvictionAPI","message":"Eviction API: evicting"}])");
  evicted = with(evicted, R"("uid":"a0c7e776")", R"("uid":"a0c7e776","deletionTimestamp":"2026-11-28T19:00:00Z")");
  auto event = parse_pod_event(R"({"type":"MODIFIED","object":)" + evicted + "}");
  ASSERT_TRUE(event.is_ok()) << event.status().message();
  EXPECT_EQ(event->pod->disruption, "EvictionByEvictionAPI");
  EXPECT_TRUE(event->pod->deleting);

  std::string cleared = with(std::string(kFailedPod), R"("phase":"Failed")",
                             R"("phase":"Failed","conditions":[{"type":"DisruptionTarget","status":"False",)"
                             R"("reason":"PreemptionByScheduler"}])");
  auto plain = parse_pod_event(R"({"type":"MODIFIED","object":)" + cleared + "}");
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  EXPECT_EQ(plain->pod->disruption, "");
  EXPECT_FALSE(plain->pod->deleting);
}

// Why a pod has not started: its first waiting container's reason and
// message, as the kubelet writes them; none while every container runs.
TEST(KubeApiTest, AWaitingContainersReasonIsRead) {
  std::string pulling = with(std::string(kFailedPod), R"({"terminated":{"exitCode":3,"reason":"Error"}})",
                             R"({"waiting":{"reason":"ErrImagePull","message":"failed to pull \"x\""}})");
  pulling = with(pulling, R"("phase":"Failed")", R"("phase":"Pending")");
  auto event = parse_pod_event(R"({"type":"MODIFIED","object":)" + pulling + "}");
  ASSERT_TRUE(event.is_ok()) << event.status().message();
  EXPECT_EQ(event->pod->waiting, "ErrImagePull: failed to pull \"x\"");
  EXPECT_EQ(event->pod->exit_code, 0);

  auto ended = parse_pod_event(R"({"type":"MODIFIED","object":)" + std::string(kFailedPod) + "}");
  ASSERT_TRUE(ended.is_ok()) << ended.status().message();
  EXPECT_EQ(ended->pod->waiting, "");

  std::string bad = with(pulling, R"("reason":"ErrImagePull")", R"("reason":7)");
  auto refused = parse_pod_event(R"({"type":"MODIFIED","object":)" + bad + "}");
  ASSERT_TRUE(refused.is_ok()) << refused.status().message();
  ASSERT_TRUE(refused->unreadable.has_value());
  EXPECT_FALSE(refused->pod.has_value());
  EXPECT_NE(refused->unreadable->error.find("state.waiting.reason"), std::string::npos) << refused->unreadable->error;
}

// One item the agent cannot read (a quantity beyond what it holds) is left
// out and named; the rest of the list is read. A quantity finer than its
// unit is read as Kubernetes reads it (memory "100m" is 1 byte).
TEST(KubeApiTest, AnUnreadableItemIsLeftOutAndNamedNotTheWholeList) {
  std::string huge = with(std::string(kFailedPod), R"("memory":"512Mi")", R"("memory":"100E")");
  huge = with(huge, R"("name":"p1")", R"("name":"huge")");
  std::string fine = with(std::string(kFailedPod), R"("memory":"512Mi")", R"("memory":"100m")");
  auto list = parse_pod_list(R"({"metadata":{"resourceVersion":"7"},"items":[)" + huge + "," + fine + "]}");
  ASSERT_TRUE(list.is_ok()) << list.status().message();
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0].name, "p1");
  EXPECT_EQ(list->items[0].requests.memory_bytes, 1);
  ASSERT_EQ(list->unreadable.size(), 1u);
  EXPECT_EQ(list->unreadable[0].full_name(), "default/huge");
  EXPECT_NE(list->unreadable[0].error.find("PodList.items[0].spec.containers[].resources.requests.memory"),
            std::string::npos)
      << list->unreadable[0].error;
  auto nameless = parse_pod_list(R"({"metadata":{"resourceVersion":"7"},"items":[7]})");
  ASSERT_TRUE(nameless.is_ok());
  ASSERT_EQ(nameless->unreadable.size(), 1u);
  EXPECT_EQ(nameless->unreadable[0].name, "");
}

// A page of a list names the next (metadata.continue); the last, none.
TEST(KubeApiTest, APageOfAListNamesTheNextOne) {
  auto first = parse_pod_list(R"({"metadata":{"resourceVersion":"7","continue":"eyJ2IjoibWV0YSJ9"},"items":[]})");
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_EQ(first->continue_token, "eyJ2IjoibWV0YSJ9");
  auto last = parse_node_list(R"({"metadata":{"resourceVersion":"7"},"items":[]})");
  ASSERT_TRUE(last.is_ok()) << last.status().message();
  EXPECT_EQ(last->continue_token, "");
  auto odd = parse_pod_list(R"({"metadata":{"resourceVersion":"7","continue":7},"items":[]})");
  ASSERT_FALSE(odd.is_ok());
  EXPECT_EQ(odd.status().message(), "PodList.metadata.continue: expected a string");
}

TEST(KubeApiTest, BookmarksAndTheGoneErrorAreEventsToo) {
  auto bookmark = parse_pod_event(R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"12"}}})");
  ASSERT_TRUE(bookmark.is_ok()) << bookmark.status().message();
  EXPECT_EQ(bookmark->type, KubeEvent::Type::kBookmark);
  EXPECT_EQ(bookmark->resource_version, "12");
  auto gone = parse_node_event(
      R"json({"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version: 1 (200)","reason":"Expired","code":410}})json");
  ASSERT_TRUE(gone.is_ok()) << gone.status().message();
  EXPECT_EQ(gone->type, KubeEvent::Type::kError);
  EXPECT_EQ(gone->error_code, 410);
  EXPECT_NE(gone->error.find("too old"), std::string::npos);
}

TEST(KubeApiTest, BadAnswersAreOneLineNamingTheField) {
  // A watch line that cannot be read is an error; an object in it that
  // cannot be read is an event that says so.
  auto error_of = [](const Result<KubeEvent>& result) {
    if (!result.is_ok()) return result.status().message();
    return result->unreadable ? result->unreadable->error : std::string("(read)");
  };
  EXPECT_NE(error_of(parse_pod_event("not json")).find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error_of(parse_pod_event(R"({"type":"SIDEWAYS","object":{}})")).find("type"), std::string::npos);
  std::string bad_cpu = with(std::string(kFailedPod), R"("cpu":"250m")", R"("cpu":"lots")");
  EXPECT_NE(error_of(parse_pod_event(R"({"type":"ADDED","object":)" + bad_cpu + "}"))
                .find("spec.containers[].resources.requests.cpu"),
            std::string::npos);
  std::string bad_code = with(std::string(kFailedPod), R"("exitCode":3)", R"("exitCode":"3")");
  EXPECT_NE(error_of(parse_pod_event(R"({"type":"ADDED","object":)" + bad_code + "}")).find("exitCode"),
            std::string::npos);
  auto list = parse_node_list(R"({"metadata":{"resourceVersion":"1"},"items":{}})");
  ASSERT_FALSE(list.is_ok());
  EXPECT_NE(list.status().message().find("NodeList.items: expected a list"), std::string::npos);
  auto not_a_list = parse_node_list("[]");
  ASSERT_FALSE(not_a_list.is_ok());
  EXPECT_EQ(not_a_list.status().message().find('\n'), std::string::npos);
  auto nameless = parse_node_list(R"({"items":[{"metadata":{}}]})");
  ASSERT_TRUE(nameless.is_ok()) << nameless.status().message();
  ASSERT_EQ(nameless->unreadable.size(), 1u);
  EXPECT_NE(nameless->unreadable[0].error.find("NodeList.items[0].metadata.name"), std::string::npos)
      << nameless->unreadable[0].error;
  EXPECT_EQ(nameless->unreadable[0].error.find('\n'), std::string::npos);
  EXPECT_EQ(kube_status_message(R"({"kind":"Status","message":"pods \"p\" already exists","code":409})"),
            "pods \"p\" already exists");
}

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/shoal-kubeconfig.XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  Result<KubeConfig> parse(const std::string& text, const std::string& context = "") {
    return parse_kubeconfig(text, "kubeconfig k", dir_, context);
  }
  std::string dir_;
};

TEST_F(KubeconfigTest, TheCurrentContextsServerCaAndTokenAreRead) {
  std::ofstream(dir_ + "/ca.crt") << "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
  auto config = parse(R"(apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster: {server: "https://127.0.0.1:6443/", certificate-authority: ca.crt}
- name: other
  cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: Q0EK}
users:
- name: admin
  user: {token: abc}
- name: robot
  user: {client-certificate-data: Q0VSVAo=, client-key-data: S0VZCg==}
contexts:
- name: dev
  context: {cluster: dev, user: admin, namespace: team-a}
- name: other
  context: {cluster: other, user: robot}
current-context: dev
)");
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(config->server, "https://127.0.0.1:6443");
  EXPECT_NE(config->ca_pem.find("BEGIN CERTIFICATE"), std::string::npos) << "read relative to the kubeconfig";
  EXPECT_EQ(config->token, "abc");
  EXPECT_EQ(config->namespace_name, "team-a");
}

TEST_F(KubeconfigTest, ANamedContextWithDataFieldsAndAClientCertificate) {
  auto config = parse(R"(clusters:
- name: other
  cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: Q0EK}
users:
- name: robot
  user: {client-certificate-data: Q0VSVAo=, client-key-data: S0VZCg==}
contexts:
- name: other
  context: {cluster: other, user: robot}
current-context: missing
)", "other");
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(config->ca_pem, "CA\n");
  EXPECT_EQ(config->client_cert_pem, "CERT\n");
  EXPECT_EQ(config->client_key_pem, "KEY\n");
  EXPECT_TRUE(config->token.empty());
  EXPECT_EQ(config->namespace_name, "default");
}

TEST_F(KubeconfigTest, WhatCannotBeUsedIsRefusedNamingTheField) {
  const std::string head = "clusters:\n- name: c\n  cluster: {server: \"https://h:1\"}\ncontexts:\n"
                           "- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";
  auto error_of = [&](const std::string& text) {
    auto config = parse(text);
    EXPECT_FALSE(config.is_ok()) << text;
    return config.is_ok() ? std::string() : config.status().message();
  };
  EXPECT_NE(error_of(head + "users:\n- name: u\n  user: {}\n").find("users[0].user: expected a token"),
            std::string::npos);
  EXPECT_NE(error_of(head + "users:\n- name: u\n  user: {exec: {command: aws}}\n").find("exec"),
            std::string::npos);
  EXPECT_NE(error_of(head + "users:\n- name: u\n  user: {client-key-data: '!!'}\n").find("client-key-data: expected base64"),
            std::string::npos);
  EXPECT_NE(error_of(head + "users:\n- name: u\n  user: {client-certificate-data: Q0VSVAo=}\n")
                .find("both client-certificate and client-key"),
            std::string::npos);
  EXPECT_NE(error_of(head + "users:\n- name: v\n  user: {token: t}\n").find("users: no entry named \"u\""),
            std::string::npos);
  EXPECT_NE(error_of(head + "users:\n- name: u\n  user: {tokenFile: nowhere}\n").find("tokenFile"),
            std::string::npos);
  std::string insecure = with(head, "server:", "insecure-skip-tls-verify: true, server:");
  EXPECT_NE(error_of(insecure + "users:\n- name: u\n  user: {token: t}\n").find("insecure-skip-tls-verify"),
            std::string::npos);
  std::string plain = with(head, "https://h:1", "h:1");
  EXPECT_NE(error_of(plain + "users:\n- name: u\n  user: {token: t}\n").find("clusters[0].cluster.server: expected https://"),
            std::string::npos);
  EXPECT_NE(error_of("- a list\n").find("expected a kubeconfig"), std::string::npos);
  EXPECT_NE(error_of("clusters: []\n").find("current-context"), std::string::npos);
}

TEST_F(KubeconfigTest, ATokenFileIsRememberedToBeReadAgainAndMayNotBeEmpty) {
  std::ofstream(dir_ + "/ca.crt") << "CA";
  std::ofstream(dir_ + "/token") << "rotating\n";
  std::string kubeconfig = "clusters:\n- name: c\n  cluster: {server: \"https://10.0.0.1:6443\", certificate-authority: ca.crt}\n"
                           "users:\n- name: u\n  user: {tokenFile: token}\n"
                           "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";
  auto config = parse_kubeconfig(kubeconfig, "kubeconfig k", dir_);
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(config->token, "rotating");
  EXPECT_EQ(config->token_file, dir_ + "/token");
  std::ofstream(dir_ + "/token") << "\n";
  auto empty = parse_kubeconfig(kubeconfig, "kubeconfig k", dir_);
  ASSERT_FALSE(empty.is_ok());
  EXPECT_EQ(empty.status().message(), "kubeconfig k: users[0].user.tokenFile: " + dir_ + "/token holds no token");
}

TEST_F(KubeconfigTest, InClusterReadsThePodsServiceAccount) {
  std::ofstream(dir_ + "/token") << "sa-token\n";
  std::ofstream(dir_ + "/ca.crt") << "CA";
  std::ofstream(dir_ + "/namespace") << "shoal-system";
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto config = in_cluster_config(dir_);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(config.is_ok()) << config.status().message();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token, "sa-token");
  EXPECT_EQ(config->token_file, dir_ + "/token") << "read again as the kubelet rotates it";
  EXPECT_EQ(config->namespace_name, "shoal-system");
  auto outside = in_cluster_config(dir_);
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

}  // namespace
}  // namespace shoal::cluster::kubernetes
