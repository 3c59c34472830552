// KubeClient and KubeRunner against a real kube-apiserver (the dev cluster
// of scripts/k8s-dev.sh): nodes listed, a pod created once (a second create
// is AlreadyExists) and watched through its phases to its exit code, a token
// the server does not know refused, a server that does not answer reported
// Unavailable within the timeout, a token file read again after a 401; the
// runner's lists read in pages, and its watches, cut on the way, going on
// from where they were.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/cluster/kubernetes/kube_api.h"
#include "agent/cluster/kubernetes/kube_runner.h"
#include "dev_k8s.h"
#include "harness.h"

namespace shoal::cluster::kubernetes {
namespace {

using namespace std::chrono_literals;
using shoal::testing::DevK8s;
using shoal::testing::DevK8sEnvironment;
using shoal::testing::wait_until;

DevK8s& dev_k8s() {
  static DevK8s cluster;
  return cluster;
}
const auto* const kDevK8s = ::testing::AddGlobalTestEnvironment(new DevK8sEnvironment(dev_k8s(), 2, 8));

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

// A bound ServiceAccount token rotates: the kubelet writes the new one into
// the pod's file, and a client that read it once is refused (401) once the
// old one expires. The file is read again after a 401, so the next call
// goes with the new token.
TEST_F(KubeApiLive, ATokenFileIsReadAgainAfterTheServerRefusesTheTokenItHeld) {
  KubeClient admin = client();
  auto account = admin.call("POST", "/api/v1/namespaces/default/serviceaccounts",
                            R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"rotating"}})");
  ASSERT_TRUE(account.is_ok() && (account->status == 201 || account->status == 409)) << account.status().message();
  auto requested = admin.call("POST", "/api/v1/namespaces/default/serviceaccounts/rotating/token",
                              R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest",)"
                              R"("spec":{"expirationSeconds":600}})");
  ASSERT_TRUE(requested.is_ok()) << requested.status().message();
  ASSERT_EQ(requested->status, 201) << requested->body;
  std::string fresh = nlohmann::json::parse(requested->body)["status"]["token"];

  std::string file = std::filesystem::temp_directory_path() / ("shoal-token-" + std::to_string(getpid()));
  auto write = [&](const std::string& token) {
    std::string next = file + ".new";
    { std::ofstream(next) << token << "\n"; }
    std::filesystem::rename(next, file);  // as the kubelet swaps it: whole
  };
  write("expired-token");
  KubeConfig rotating = config_;
  rotating.client_cert_pem.clear();
  rotating.client_key_pem.clear();
  rotating.token_file = file;
  auto read = read_token_file(file, "tokenFile");
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  rotating.token = *read;
  KubeClient api({rotating, 5s});
  // Discovery is for any authenticated caller, and for no one else.
  auto refused = api.call("GET", "/api");
  ASSERT_TRUE(refused.is_ok()) << refused.status().message();
  EXPECT_EQ(refused->status, 401);

  write(fresh);
  auto known = api.call("GET", "/api");
  auto who = api.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                      R"({"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"})");
  std::filesystem::remove(file);
  (void)admin.call("DELETE", "/api/v1/namespaces/default/serviceaccounts/rotating");
  ASSERT_TRUE(known.is_ok()) << known.status().message();
  EXPECT_EQ(known->status, 200) << known->body;
  ASSERT_TRUE(who.is_ok()) << who.status().message();
  EXPECT_EQ(who->status, 201) << who->body;
  EXPECT_NE(who->body.find("system:serviceaccount:default:rotating"), std::string::npos) << who->body;
}

// A TCP proxy on loopback in front of the API server. TLS passes through
// it untouched; cut() closes every connection open at that moment, as a
// load balancer that restarts or drops idle streams does.
class CuttableProxy {
 public:
  explicit CuttableProxy(uint16_t upstream) : upstream_(upstream) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(0);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener_, 64) != 0) {
      std::abort();
    }
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~CuttableProxy() {
    quit_ = true;
    thread_.join();
    for (auto [client, server] : open_) {
      close(client);
      close(server);
    }
    close(listener_);
  }
  uint16_t port() const { return port_; }
  void cut() { cut_requested_ = true; }
  int connections_cut() const { return cut_.load(); }

 private:
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return address;
  }
  // One thread: accepts, pumps bytes both ways, and closes what cut() asks.
  void serve() {
    while (!quit_) {
      if (cut_requested_.exchange(false)) {
        for (auto [client, server] : open_) {
          close(client);
          close(server);
        }
        cut_ += static_cast<int>(open_.size());
        open_.clear();
      }
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (auto [client, server] : open_) {
        fds.push_back({client, POLLIN, 0});
        fds.push_back({server, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int client = accept(listener_, nullptr, nullptr);
        int server = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address = loopback(upstream_);
        if (client >= 0 && connect(server, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
          open_.push_back({client, server});
        } else {
          close(client);
          close(server);
        }
      }
      std::vector<std::pair<int, int>> kept;
      for (size_t i = 0; i < (fds.size() - 1) / 2; ++i) {
        auto [client, server] = open_[i];
        bool alive = pump(fds[1 + 2 * i], server) && pump(fds[2 + 2 * i], client);
        if (alive) {
          kept.push_back(open_[i]);
        } else {
          close(client);
          close(server);
        }
      }
      kept.insert(kept.end(), open_.begin() + static_cast<long>((fds.size() - 1) / 2), open_.end());
      open_ = std::move(kept);
    }
  }
  // Copies what `from` has to `to`; false once either end is closed.
  static bool pump(const pollfd& from, int to) {
    if (!(from.revents & (POLLIN | POLLHUP | POLLERR))) return true;
    char buffer[65536];
    ssize_t got = read(from.fd, buffer, sizeof buffer);
    if (got <= 0) return false;
    for (ssize_t sent = 0; sent < got;) {
      ssize_t wrote = write(to, buffer + sent, static_cast<size_t>(got - sent));
      if (wrote <= 0) return false;
      sent += wrote;
    }
    return true;
  }

  uint16_t upstream_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> quit_{false};
  std::atomic<bool> cut_requested_{false};
  std::atomic<int> cut_{0};
  std::vector<std::pair<int, int>> open_;  // serve()'s: client, server
  std::thread thread_;
};

// Pods of somebody else's on one node, each asking `cpu`; deleted at the end.
class OthersPods {
 public:
  OthersPods(KubeClient& api, const std::string& node, const std::string& prefix, int count, const std::string& cpu)
      : api_(api) {
    for (int i = 0; i < count; ++i) {
      std::string name = prefix + "-" + std::to_string(i);
      auto created = api_.call("POST", "/api/v1/namespaces/default/pods",
                               R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                                   R"(","namespace":"default"},"spec":{"nodeName":")" + node +
                                   R"(","containers":[{"name":"main","image":"none","resources":{"requests":{"cpu":")" +
                                   cpu + R"("}}}]}})");
      EXPECT_TRUE(created.is_ok() && created->status == 201) << name;
      names_.push_back(name);
    }
  }
  ~OthersPods() {
    for (const std::string& name : names_) {
      (void)api_.call("DELETE", "/api/v1/namespaces/default/pods/" + name, R"({"gracePeriodSeconds":0})");
    }
  }

 private:
  KubeClient& api_;
  std::vector<std::string> names_;
};

class KubeRunnerLive : public KubeApiLive {
 protected:
  void TearDown() override { std::filesystem::remove_all(state_dir_); }
  std::unique_ptr<KubeRunner> start_runner(const std::string& server, int page_size,
                                           std::chrono::seconds keep_finished = std::chrono::hours(1)) {
    KubeRunnerOptions options;
    options.keep_finished = keep_finished;
    options.config = config_;
    options.config.server = server;
    options.cluster_name = "live";
    options.state_dir = state_dir_;
    options.nodes = {{"kwok-node-0", {}, {}}, {"kwok-node-1", {}, {}}};
    options.list_page_size = page_size;
    auto runner = KubeRunner::create(std::move(options));
    EXPECT_TRUE(runner.is_ok()) << runner.status().message();
    return runner.is_ok() ? std::move(*runner) : nullptr;
  }
  // A copy `name` of one replica of `cpu_milli` that KWOK runs for an hour
  // on kwok-node-0.
  static LaunchRequest one_hour_on_node_0(const std::string& name, int64_t cpu_milli) {
    LaunchRequest request;
    request.key = "src/" + name;
    request.uid = name;
    request.epoch = 1;
    request.source_cluster = "src";
    request.spec.name = name;
    request.spec.namespace_name = "default";
    request.spec.resources.cpu_milli = cpu_milli;
    request.spec.labels = {{"shoal.dev/kwok-run-for", "1h"}};
    request.nodes = {"kwok-node-0"};
    return request;
  }
  int64_t others_cpu_on(const KubeRunner& runner, const std::string& node) {
    auto taken = runner.room_taken_by_others();
    auto found = taken.find(node);
    return found == taken.end() ? 0 : found->second.cpu_milli;
  }
  std::string state_dir_ = std::filesystem::temp_directory_path() / ("shoal-runner-live-" + std::to_string(getpid()));
};

TEST_F(KubeRunnerLive, AListReadInPagesCountsEveryPodOfEveryPage) {
  KubeClient api = client();
  OthersPods others(api, "kwok-node-0", "paged", 5, "300m");
  std::unique_ptr<KubeRunner> runner = start_runner(config_.server, /*page_size=*/2);
  ASSERT_TRUE(runner);
  // The three lists count when each is done, not when the room they read
  // shows: a slow list (under ASan) may still be counting after it.
  EXPECT_TRUE(wait_until(
      [&] {
        return runner->health().is_ok() && others_cpu_on(*runner, "kwok-node-0") >= 1500 &&
               runner->api_stats()->lists >= 3;
      },
      20s))
      << runner->health().message();
  EXPECT_EQ(others_cpu_on(*runner, "kwok-node-0"), 1500) << "5 pods of 300m, read 2 to a page";
  EXPECT_EQ(runner->broken_tally(), "");
  EXPECT_EQ(runner->api_stats()->lists, 3) << "our pods, others' pods and the nodes, once each";
}

// The room of our own pods is ours, not others': while the copy runs; after
// a restart, until the copy is known again (here: stopped, as a copy the
// core did not launch again is); and once it is gone. The tallies kept
// event by event agree with a count over every pod throughout.
TEST_F(KubeRunnerLive, OurPodsRoomIsNeverOthersAndTheTalliesAgreeWithACountOverEveryPod) {
  KubeClient api = client();
  OthersPods others(api, "kwok-node-0", "beside", 2, "250m");
  std::unique_ptr<KubeRunner> runner = start_runner(config_.server, 500);
  ASSERT_TRUE(runner);
  ASSERT_TRUE(wait_until([&] { return others_cpu_on(*runner, "kwok-node-0") == 500; }, 20s));
  LaunchRequest request = one_hour_on_node_0("tally", 2000);
  ASSERT_TRUE(runner->launch(request).is_ok());
  auto now = [] { return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()); };
  auto observed = [&](WorkloadEventKind kind) {
    return wait_until([&] {
      for (const WorkloadEvent& event : runner->observe(now())) {
        if (event.key == request.key && event.kind == kind) return true;
      }
      return false;
    }, 30s);
  };
  ASSERT_TRUE(observed(WorkloadEventKind::kStarted));
  EXPECT_EQ(others_cpu_on(*runner, "kwok-node-0"), 500) << "its 2 cpus are the copy's own";
  EXPECT_EQ(runner->broken_tally(), "");

  runner.reset();  // the agent restarts: its pod runs on
  runner = start_runner(config_.server, 500);
  ASSERT_TRUE(runner);
  ASSERT_TRUE(wait_until([&] { return others_cpu_on(*runner, "kwok-node-0") == 2500; }, 20s))
      << "a pod of ours that no copy holds yet takes room";
  EXPECT_EQ(runner->broken_tally(), "");
  ASSERT_FALSE(runner->stop(request.key, Duration(1000))) << "its pod still runs";
  EXPECT_EQ(others_cpu_on(*runner, "kwok-node-0"), 500) << "stopping, the copy holds its room";
  EXPECT_EQ(runner->broken_tally(), "");
  ASSERT_TRUE(observed(WorkloadEventKind::kStopped));
  EXPECT_EQ(others_cpu_on(*runner, "kwok-node-0"), 500);
  EXPECT_EQ(runner->broken_tally(), "");
}

// The kubelet admits at most allocatable.pods pods: a node holding that
// many takes no more work, whatever cpu it has left (else OutOfpods).
TEST_F(KubeRunnerLive, ANodeHoldingAsManyPodsAsItsKubeletAdmitsCountsAsFull) {
  KubeClient api = client();
  auto set_pods = [&](const char* pods) {
    std::string out = dev_k8s().kubectl(
        std::string("patch node kwok-node-1 --subresource=status --type=merge -p "
                    "'{\"status\":{\"allocatable\":{\"pods\":\"") +
        pods + "\"}}}' 2>&1");
    return out.find("patched") != std::string::npos;
  };
  std::unique_ptr<KubeRunner> runner = start_runner(config_.server, 500);
  ASSERT_TRUE(runner);
  OthersPods others(api, "kwok-node-1", "one-slot", 1, "100m");
  ASSERT_TRUE(wait_until([&] { return others_cpu_on(*runner, "kwok-node-1") == 100; }, 20s))
      << "one pod of 100m, room for 110";
  ASSERT_TRUE(set_pods("1"));
  bool full = wait_until([&] { return others_cpu_on(*runner, "kwok-node-1") >= int64_t{1} << 50; }, 20s);
  EXPECT_TRUE(set_pods("110"));
  EXPECT_TRUE(full) << "the node's one pod slot is taken";
  EXPECT_TRUE(wait_until([&] { return others_cpu_on(*runner, "kwok-node-1") == 100; }, 20s))
      << "room again once the kubelet admits more";
  EXPECT_EQ(runner->broken_tally(), "");
}

// A node's allocatable and labels change after it joined (the kubelet
// reserves more, a device plugin registers, an operator labels it): the
// nodes watch tells the cluster the node as it is now, once per change.
TEST_F(KubeRunnerLive, ANodesNewAllocatableAndLabelsAreToldOncePerChange) {
  auto patch_cpu = [&](const char* cpu) {
    std::string out = dev_k8s().kubectl(
        std::string("patch node kwok-node-1 --subresource=status --type=merge -p "
                    "'{\"status\":{\"allocatable\":{\"cpu\":\"") +
        cpu + "\"}}}' 2>&1");
    return out.find("patched") != std::string::npos;
  };
  std::unique_ptr<KubeRunner> runner = start_runner(config_.server, 500);
  ASSERT_TRUE(runner);
  // What the runner was started with differs from the nodes' real
  // allocatable: both are told first.
  std::map<std::string, model::NodeSpec> told;
  auto take = [&] {
    for (model::NodeSpec& node : runner->take_node_changes()) told[node.name] = std::move(node);
  };
  ASSERT_TRUE(wait_until([&] { take(); return told.count("kwok-node-0") && told.count("kwok-node-1"); }, 20s));
  EXPECT_EQ(told["kwok-node-1"].capacity.cpu_milli, 8000);
  told.clear();

  ASSERT_TRUE(patch_cpu("6"));
  std::string labelled = dev_k8s().kubectl("label node kwok-node-1 shoal.dev/test-pool=relabelled 2>&1");
  bool seen = wait_until(
      [&] {
        take();
        auto it = told.find("kwok-node-1");
        return it != told.end() && it->second.capacity.cpu_milli == 6000 &&
               it->second.labels.count("shoal.dev/test-pool");
      },
      20s);
  EXPECT_TRUE(patch_cpu("8"));
  dev_k8s().kubectl("label node kwok-node-1 shoal.dev/test-pool- 2>&1");
  EXPECT_NE(labelled.find("labeled"), std::string::npos) << labelled;
  EXPECT_TRUE(seen) << "6 cpus and the new label told";
  EXPECT_FALSE(told.count("kwok-node-0")) << "an unchanged node is not told again";
  told.clear();
  EXPECT_TRUE(wait_until(
      [&] {
        take();
        auto it = told.find("kwok-node-1");
        return it != told.end() && it->second.capacity.cpu_milli == 8000 &&
               !it->second.labels.count("shoal.dev/test-pool");
      },
      20s))
      << "and back";
}

// A copy forgotten just before a restart (or lost with the agent's data)
// leaves pods with no record of them: found and deleted once finished, or
// if they run on, in being, for keepFinished, and seen at an earlier look.
// A pod a copy holds is never taken for left behind, however old.
TEST_F(KubeRunnerLive, APodOfOursThatNoCopyHoldsIsDeletedOnceKeepFinishedHasPassed) {
  KubeClient api = client();
  auto make = [&](const std::string& name, const std::string& labels) {
    auto created = api.call("POST", "/api/v1/namespaces/default/pods",
                            R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                                R"(","namespace":"default","labels":{"shoal.dev/cluster":"live")" + labels +
                                R"(}},"spec":{"nodeName":"kwok-node-0","restartPolicy":"Never",)"
                                R"("terminationGracePeriodSeconds":1,"containers":[{"name":"main","image":"none"}]}})");
    return created.is_ok() && created->status == 201;
  };
  auto exists = [&](const std::string& name) {
    auto got = api.call("GET", "/api/v1/namespaces/default/pods/" + name);
    return got.is_ok() && got->status == 200;
  };
  ASSERT_TRUE(make("left-behind", R"(,"shoal.dev/kwok-run-for":"0s")"));
  ASSERT_TRUE(make("running-left-behind", ""));
  std::unique_ptr<KubeRunner> runner = start_runner(config_.server, 500, std::chrono::seconds(1));
  ASSERT_TRUE(runner);
  LaunchRequest request = one_hour_on_node_0("held", 100);
  ASSERT_TRUE(runner->launch(request).is_ok());
  auto now = [] { return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()); };
  bool swept = wait_until(
      [&] {
        (void)runner->observe(now());
        return !exists("left-behind") && !exists("running-left-behind");
      },
      60s);
  auto ours = api.call("GET", "/api/v1/namespaces/default/pods?labelSelector=shoal.dev%2Fcluster%3Dlive");
  (void)api.call("DELETE", "/api/v1/namespaces/default/pods/left-behind", R"({"gracePeriodSeconds":0})");
  (void)api.call("DELETE", "/api/v1/namespaces/default/pods/running-left-behind", R"({"gracePeriodSeconds":0})");
  ASSERT_TRUE(ours.is_ok());
  nlohmann::json pods = nlohmann::json::parse(ours->body, nullptr, false);
  ASSERT_TRUE(pods.is_object() && pods["items"].is_array()) << ours->body;
  bool held_kept = pods["items"].size() == 1 && pods["items"][0]["metadata"]["labels"]["shoal.dev/uid"] == "held";
  EXPECT_TRUE(swept) << "the finished pod and the running one that no copy holds are deleted";
  EXPECT_TRUE(held_kept) << "the pod a copy holds is kept: " << ours->body;
  EXPECT_FALSE(runner->stop(request.key, Duration(1000)));
  EXPECT_TRUE(wait_until([&] {
    for (const WorkloadEvent& event : runner->observe(now())) {
      if (event.key == request.key && event.kind == WorkloadEventKind::kStopped) return true;
    }
    return false;
  }, 30s));
}

TEST_F(KubeRunnerLive, AWatchCutOnTheWayGoesOnFromItsVersionWithoutListingAgain) {
  uint16_t upstream = static_cast<uint16_t>(std::stoi(config_.server.substr(config_.server.rfind(':') + 1)));
  CuttableProxy proxy(upstream);
  std::unique_ptr<KubeRunner> runner = start_runner("https://127.0.0.1:" + std::to_string(proxy.port()), 500);
  ASSERT_TRUE(runner);
  ASSERT_TRUE(wait_until([&] { return runner->health().is_ok() && runner->api_stats()->lists == 3; }, 20s))
      << runner->health().message();

  // A watch cut while open ends in a transport error (or, read as the
  // server's own end, cleanly): either way it goes on from its version.
  proxy.cut();
  ASSERT_TRUE(wait_until([&] { return runner->api_stats()->watches_resumed >= 1; }, 20s))
      << "connections cut: " << proxy.connections_cut();
  KubeClient api = client();
  OthersPods others(api, "kwok-node-1", "after-cut", 1, "700m");
  EXPECT_TRUE(wait_until([&] { return others_cpu_on(*runner, "kwok-node-1") == 700; }, 20s))
      << "a pod made after the cut is seen by the watch that went on";
  EXPECT_EQ(runner->api_stats()->lists, 3) << "no list again: the watches went on from their versions";
  EXPECT_TRUE(wait_until([&] { return runner->health().is_ok(); }, 20s)) << runner->health().message();
}

}  // namespace
}  // namespace shoal::cluster::kubernetes
