// A throw-away dev Kubernetes control plane (scripts/k8s-dev.sh) for one
// test binary: up once before the first test, down after the last. Needs
// the binaries `scripts/k8s-dev.sh build` makes; tests skip without them,
// except under CI=true (or SHOAL_REQUIRE_K8S=1), where they fail.
// Header-only: the suites that use it are separate binaries.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dev_slurm.h"  // run_shell, pids_naming

namespace shoal::testing {

// Why the dev Kubernetes cannot run here, or "" when it can.
inline std::string dev_k8s_unavailable() {
  std::string dir = run_shell("bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh bin-dir 2>/dev/null");
  return dir.empty() ? "the dev Kubernetes is not built (scripts/k8s-dev.sh build)" : "";
}

inline bool k8s_tests_required() {
  const char* ci = std::getenv("CI");
  const char* required = std::getenv("SHOAL_REQUIRE_K8S");
  return (ci && std::string(ci) == "true") || (required && std::string(required) == "1");
}

#define SHOAL_NEED_DEV_K8S(cluster)                                                       \
  do {                                                                                    \
    if (std::string why = ::shoal::testing::dev_k8s_unavailable(); !why.empty()) {        \
      if (::shoal::testing::k8s_tests_required())                                         \
        FAIL() << why << ", and CI=true (or SHOAL_REQUIRE_K8S=1) requires these tests";   \
      GTEST_SKIP() << why;                                                                \
    }                                                                                     \
    ASSERT_FALSE((cluster).kubeconfig().empty()) << "scripts/k8s-dev.sh up failed";       \
  } while (false)

class DevK8s {
 public:
  // Starts `nodes` nodes of `cpus` cpus in a fresh directory; kubeconfig()
  // is empty when it did not come up (the script's output went to stderr).
  void up(int nodes, int cpus) {
    char pattern[] = "/tmp/shoal-k8s-XXXXXX";
    dir_ = mkdtemp(pattern);
    std::string out = run_shell("bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh up " + dir_ + " --nodes " +
                                std::to_string(nodes) + " --cpus " + std::to_string(cpus) + " 2>&1");
    std::string last = out.substr(out.find_last_of('\n', out.size() - 2) + 1);
    while (!last.empty() && last.back() == '\n') last.pop_back();
    kubeconfig_ = std::filesystem::exists(last) ? last : "";
    if (kubeconfig_.empty()) std::fprintf(stderr, "k8s-dev.sh up failed:\n%s\n", out.c_str());
    bin_ = run_shell("bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh bin-dir 2>/dev/null");
    while (!bin_.empty() && bin_.back() == '\n') bin_.pop_back();
  }

  // Stops it and removes its directory. Returns the pids of processes still
  // naming the directory after `down`: empty is a clean stop.
  std::vector<std::string> down(std::string* script_output = nullptr) {
    if (dir_.empty()) return {};
    std::string out = run_shell("bash " SHOAL_SOURCE_DIR "/scripts/k8s-dev.sh down " + dir_ + " 2>&1");
    if (script_output) *script_output = out;
    std::vector<std::string> left = pids_naming(dir_ + "/");
    std::filesystem::remove_all(dir_);
    dir_.clear();
    return left;
  }

  // Installs the Helm chart's ServiceAccount and RBAC (deploy/helm/shoal,
  // release "shoal" in namespace shoal-system, work in `namespaces`) and
  // writes a kubeconfig that authenticates as that ServiceAccount: the
  // backend's tests run with exactly the chart's rights, not an admin's.
  // Returns its path, or "" (and why, on stderr) when that failed.
  std::string install_chart_rbac(const std::string& namespaces = "{default}") {
    std::string chart = SHOAL_SOURCE_DIR "/deploy/helm/shoal";
    std::string out = run_shell(
        "set -e; " + kubectl_command() + " create namespace shoal-system >/dev/null 2>&1 || true; " + bin_ +
        "/helm template shoal " + chart + " --namespace shoal-system --set cluster=dev,org=dev" +
        " --set 'workloadNamespaces=" + namespaces + "'" +
        " --show-only templates/serviceaccount.yaml --show-only templates/rbac.yaml | " + kubectl_command() +
        " apply -f - 2>&1 && " + kubectl_command() +
        " create token shoal -n shoal-system --duration 24h 2>&1");
    std::string token = out.substr(out.find_last_of('\n', out.size() - 2) + 1);
    while (!token.empty() && token.back() == '\n') token.pop_back();
    if (token.empty() || token.find(' ') != std::string::npos) {
      std::fprintf(stderr, "installing the chart's RBAC failed:\n%s\n", out.c_str());
      return "";
    }
    std::string path = dir_ + "/shoal-sa.kubeconfig";
    std::ifstream admin(kubeconfig_);
    std::stringstream text;
    text << admin.rdbuf();
    std::string config = text.str();
    size_t at = config.find("token: \"");
    if (at == std::string::npos) return "";
    size_t end = config.find('"', at + 8);
    config.replace(at + 8, end - at - 8, token);
    std::ofstream(path) << config;
    return path;
  }

  // kubectl against this cluster: its stdout (stderr too with `2>&1` in args).
  // Every call is bounded: one that waits on something that never comes
  // fails the test that made it, not the whole run.
  std::string kubectl(const std::string& args) const { return run_shell(kubectl_command() + " " + args); }
  std::string kubectl_command() const { return "timeout 60 " + bin_ + "/kubectl --kubeconfig " + kubeconfig_; }

  // Pods of the cluster's own, bound to `node`, as odd as the API server
  // takes them: memory "100m" (one byte, rounded up), an extended resource
  // the agent does not know, no requests at all, and memory "100E" (beyond
  // what the agent reads). Each asks 1 cpu but the one without requests.
  // Returns their names (namespace default); a creation that failed fails
  // the test that asked.
  std::vector<std::string> create_odd_pods(const std::string& node) const {
    const std::pair<const char*, const char*> pods[] = {
        {"tiny-memory", R"({"requests":{"cpu":"1","memory":"100m"}})"},
        {"extended", R"({"requests":{"cpu":"1","example.com/widget":"1"},"limits":{"example.com/widget":"1"}})"},
        {"no-requests", "{}"},
        {"huge", R"({"requests":{"cpu":"1","memory":"100E"}})"}};
    std::vector<std::string> names;
    for (const auto& [name, resources] : pods) {
      std::ofstream(dir_ + "/odd.json") << R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" << name
                                        << R"("},"spec":{"nodeName":")" << node
                                        << R"(","containers":[{"name":"c","image":"x","resources":)" << resources
                                        << "}]}}";
      std::string out = kubectl("apply -f " + dir_ + "/odd.json 2>&1");
      EXPECT_NE(out.find("created"), std::string::npos) << out;
      names.push_back(name);
    }
    return names;
  }

  const std::string& dir() const { return dir_; }
  const std::string& kubeconfig() const { return kubeconfig_; }

 private:
  std::string dir_, kubeconfig_, bin_;
};

// One dev cluster of a test binary: up before its first test (`nodes` KWOK
// nodes of `cpus` cpus; the Helm chart's ServiceAccount installed, its
// kubeconfig's path in *chart_kubeconfig, when given), down after its
// last, checked to leave no process behind.
class DevK8sEnvironment : public ::testing::Environment {
 public:
  DevK8sEnvironment(DevK8s& cluster, int nodes, int cpus, std::string* chart_kubeconfig = nullptr)
      : cluster_(cluster), nodes_(nodes), cpus_(cpus), chart_kubeconfig_(chart_kubeconfig) {}
  void SetUp() override {
    if (!dev_k8s_unavailable().empty()) return;
    cluster_.up(nodes_, cpus_);
    if (chart_kubeconfig_ && !cluster_.kubeconfig().empty()) *chart_kubeconfig_ = cluster_.install_chart_rbac();
  }
  void TearDown() override {
    std::string out;
    std::vector<std::string> left = cluster_.down(&out);
    EXPECT_TRUE(left.empty()) << left.size() << " processes of a dev cluster left behind:\n" << out;
  }

 private:
  DevK8s& cluster_;
  int nodes_, cpus_;
  std::string* chart_kubeconfig_;
};

}  // namespace shoal::testing
