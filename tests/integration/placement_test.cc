// Live placement with real shoald processes: a federation places by the
// workload's whole policy, over labels, claims and counts its targets
// advertise, and chooses what `shoalctl place --live` says it would and
// what the seeds' worked examples say (seed 001's five labelled clusters,
// seed 000's two routing examples with their counts made real).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "harness.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct TargetSpec {
  std::string name;
  std::string labels = "{}";           // a YAML flow mapping
  std::string claims = "{}";
  std::vector<std::string> namespaces = {"default"};  // the source is invited into these
  bool disclose_cluster_counts = false;
};

class LivePlacement : public ::testing::Test {
 protected:
  // A source whose own cluster fits none of the work, and `specs` targets.
  void start(const std::vector<TargetSpec>& specs) {
    std::string tiny = dir_.path() + "/source.yaml";
    std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                           "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 1m, memory: 1Gi}}\n";
    source_ = std::make_unique<AgentProcess>("source", dir_.path());
    source_->init({"--cluster-config", tiny});
    for (const TargetSpec& spec : specs) {
      std::string path = dir_.path() + "/" + spec.name + ".yaml";
      std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: " << spec.name
                          << ", labels: " << spec.labels << "}\nspec:\n  claims: " << spec.claims
                          << "\n  nodes:\n  - {name: n, count: 4, capacity: {cpu: \"16\", memory: 64Gi}}\n";
      auto target = std::make_unique<AgentProcess>(spec.name, dir_.path());
      target->init({"--cluster-config", path});
      if (spec.disclose_cluster_counts) {
        target->set_config("disclose", "{labels: [\"*\"], claims: [\"*\"], clusterCounts: true}");
      }
      targets_.push_back(std::move(target));
    }
    for (AgentProcess* agent : everyone()) {
      agent->set_config("heartbeatInterval", "300ms");
      ASSERT_TRUE(agent->start()) << agent->name();
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      std::vector<std::string> args = {"invite", "create", "--to", source_->identity()};
      for (const auto& ns : specs[i].namespaces) args.insert(args.end(), {"--namespace", ns});
      CommandResult token = targets_[i]->ctl(args);
      ASSERT_EQ(token.exit_code, 0) << token.err;
      CommandResult accepted =
          source_->ctl({"invite", "accept", token.out.substr(0, token.out.find('\n'))});
      ASSERT_EQ(accepted.exit_code, 0) << accepted.err;
    }
    // Every target advertised itself, labels included.
    ASSERT_TRUE(wait_until([&] { return advertised() == specs.size(); }, 30s))
        << source_->ctl({"get", "clusters", "-o", "wide"}).out;
  }

  size_t advertised() {
    json clusters = source_->ctl_json({"get", "clusters"});
    if (clusters.is_null()) return 0;
    size_t count = 0;
    for (const auto& c : clusters["items"]) count += c["state"] == "Active" && c["unavailable"] == "";
    return count;
  }

  std::vector<AgentProcess*> everyone() {
    std::vector<AgentProcess*> out = {source_.get()};
    for (auto& target : targets_) out.push_back(target.get());
    return out;
  }

  std::string write_workload(const std::string& name, const std::string& ns, const std::string& spec) {
    std::string path = dir_.path() + "/" + ns + "-" + name + ".yaml";
    std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
                        << ", namespace: " << ns << "}\nspec: {resources: {cpu: 10m, memory: 1Mi}, "
                        << "duration: 10m, " << spec << "}\n";
    return path;
  }

  // The clusters `shoalctl place --live` decides for the workload.
  std::set<std::string> place_live(const std::string& path, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"place", "--live", "-f", path};
    args.insert(args.end(), extra.begin(), extra.end());
    json outcome = source_->ctl_json(args);
    std::set<std::string> out;
    if (outcome.is_null()) return out;
    for (const auto& d : outcome["decisions"]) out.insert(d["cluster"].get<std::string>());
    return out;
  }

  void submit(const std::string& path) {
    CommandResult result = source_->ctl({"submit", "-f", path});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }

  json describe(const std::string& ns, const std::string& name) {
    return source_->ctl_json({"describe", "workload", ns + "/" + name});
  }

  // The clusters the workload runs on, once it (or each copy) runs.
  std::set<std::string> running_at(const std::string& ns, const std::string& name) {
    std::set<std::string> out;
    bool ok = wait_until([&] {
      json w = describe(ns, name);
      return !w.is_null() && w["status"]["phase"] == "Running";
    }, 30s);
    EXPECT_TRUE(ok) << describe(ns, name).dump(2);
    std::string clusters = describe(ns, name)["status"]["cluster"];
    for (size_t start = 0; start <= clusters.size();) {
      size_t comma = clusters.find(',', start);
      if (comma == std::string::npos) comma = clusters.size();
      out.insert(clusters.substr(start, comma - start));
      start = comma + 1;
    }
    return out;
  }

  // Runs `count` workloads in `ns` at `cluster` (allow list): real counts
  // for weighted routing.
  void run_at(const std::string& cluster, const std::string& ns, int count) {
    std::string path = dir_.path() + "/fill-" + cluster + "-" + ns + ".yaml";
    std::ofstream out(path);
    for (int i = 0; i < count; ++i) {
      out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: fill-" << cluster << "-" << i
          << ", namespace: " << ns << "}\nspec: {resources: {cpu: 10m, memory: 1Mi}, duration: 10m, "
          << "placement: {clusters: [" << cluster << "]}}\n";
    }
    out.close();
    submit(path);
  }

  // Waits until the source's live inventory counts `workloads` in `ns` at
  // `cluster` (and `in_cluster` cluster-wide, when >= 0), as advertised.
  void await_counts(const std::string& cluster, const std::string& ns, int workloads, int in_cluster = -1) {
    ASSERT_TRUE(wait_until([&] {
      json clusters = source_->ctl_json({"get", "clusters", "-n", ns});
      if (clusters.is_null()) return false;
      for (const auto& c : clusters["items"]) {
        if (c["cluster"] != cluster) continue;
        return c["counts"]["namespace"]["workloads"] == workloads &&
               (in_cluster < 0 || c["counts"]["cluster"]["workloads"] == in_cluster);
      }
      return false;
    }, 60s)) << source_->ctl({"get", "clusters", "-n", ns, "-o", "json"}).out;
  }

  TempDir dir_;
  std::unique_ptr<AgentProcess> source_;
  std::vector<std::unique_ptr<AgentProcess>> targets_;
};

// Seed 001's worked example: five clusters by provider, region and zone.
std::vector<TargetSpec> seed001_clusters() {
  auto labels = [](const char* region, const char* zone) {
    return std::string("{provider: aws, region: ") + region + ", zone: " + zone + "}";
  };
  return {{"c1", labels("us-east", "us-east-1a"), "{}"},
          {"c2", labels("us-east", "us-east-1a"), "{}"},
          {"c3", labels("us-east", "us-east-1b"), "{tier: gold}"},
          {"c4", labels("us-west", "us-west-1a"), "{}"},
          {"c5", labels("us-west", "us-west-1a"), "{tier: gold}"}};
}

TEST_F(LivePlacement, SelectorsAndSpreadChooseWhatPlaceLiveAndTheSeedSay) {
  start(seed001_clusters());
  // clusterSelector: only us-west; then the first by name of the tie.
  std::string west = write_workload("west", "default",
                                    "placement: {clusterSelector: {matchLabels: {region: us-west}}}");
  std::set<std::string> decided = place_live(west);
  EXPECT_EQ(decided, (std::set<std::string>{"c4"}));
  submit(west);
  EXPECT_EQ(running_at("default", "west"), decided);
  // claimSelector, in OCM's spelling: gold claims in us-east.
  std::string gold = write_workload(
      "gold", "default",
      "placement: {predicates: [{requiredClusterSelector: {labelSelector: {matchLabels: {region: us-east}}, "
      "claimSelector: {matchLabels: {tier: gold}}}}]}");
  decided = place_live(gold);
  EXPECT_EQ(decided, (std::set<std::string>{"c3"}));
  submit(gold);
  EXPECT_EQ(running_at("default", "gold"), decided);
  // Seed 001's policy: two copies over region (ScheduleAnyway) then zone
  // (maxSkew 1, DoNotSchedule), Spread alone in Exact mode. Step 1 ties
  // (c1 by name), step 2 leaves c2 out (zone skew 2) and takes us-west.
  std::string svc = write_workload(
      "svc", "default",
      "placement: {numberOfClusters: 2, spreadPolicy: {spreadConstraints: ["
      "{topologyKey: region, whenUnsatisfiable: ScheduleAnyway}, "
      "{topologyKey: zone, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}, "
      "prioritizerPolicy: {mode: Exact, configurations: [{name: Spread, weight: 2}]}}");
  decided = place_live(svc);
  EXPECT_EQ(decided, (std::set<std::string>{"c1", "c4"}));
  submit(svc);
  EXPECT_EQ(running_at("default", "svc"), decided);
  // describe shows the engine's decision in the events.
  bool ranked = false;
  json described = describe("default", "west");
  for (const auto& e : described["events"]) {
    ranked = ranked || e["text"].get<std::string>().find("ranked c4") != std::string::npos;
  }
  EXPECT_TRUE(ranked) << describe("default", "west").dump(2);
  // A spread key no cluster has, DoNotSchedule: Pending with the engine's reason.
  std::string nowhere = write_workload(
      "nowhere", "default",
      "placement: {spreadPolicy: {spreadConstraints: [{topologyKey: rack, whenUnsatisfiable: DoNotSchedule}]}}");
  submit(nowhere);
  ASSERT_TRUE(wait_until([&] {
    json w = describe("default", "nowhere");
    return !w.is_null() && w["status"]["phase"] == "Pending" &&
           w["status"]["reason"].get<std::string>().find("MissingTopologyKey:rack") != std::string::npos;
  }, 20s)) << describe("default", "nowhere").dump(2);
}

// Seed 000, namespace domain: ns3 at A (weight 15) runs 35, at C (10) 30;
// B (10) has not invited us into ns3. A: 0.6 - 0.538 = +0.0615 wins.
TEST_F(LivePlacement, RoutingByWorkloadsInTheNamespaceFollowsSeed000) {
  start({{"a", "{}", "{}", {"ns1", "ns3"}}, {"b", "{}", "{}", {"ns1"}}, {"c", "{}", "{}", {"ns1", "ns3"}}});
  run_at("a", "ns3", 35);
  run_at("c", "ns3", 30);
  await_counts("a", "ns3", 35);
  await_counts("c", "ns3", 30);
  std::string app = write_workload(
      "app", "ns3", "placement: {routing: {weights: {a: 15, b: 10, c: 10}, metric: workloads, domain: namespace}}");
  json explained = source_->ctl_json({"place", "--live", "-f", app, "--explain"});
  ASSERT_FALSE(explained.is_null());
  ASSERT_EQ(explained["routing"].size(), 2u) << explained.dump(2);
  EXPECT_NEAR(explained["routing"][0]["difference"].get<double>(), 0.0615, 0.0001) << explained.dump(2);
  EXPECT_EQ(place_live(app), (std::set<std::string>{"a"}));
  submit(app);
  EXPECT_EQ(running_at("ns3", "app"), (std::set<std::string>{"a"}));
}

// Seed 000, cluster domain: A 35, B 30, C 25 workloads in all, weights
// 15/10/10: A +0.0397 wins (B -0.0476, C +0.0079). Cluster-wide counts go
// out only where `disclose` allows them.
TEST_F(LivePlacement, RoutingByWorkloadsInTheClusterFollowsSeed000) {
  start({{"a", "{}", "{}", {"ns1"}, true}, {"b", "{}", "{}", {"ns1"}, true}, {"c", "{}", "{}", {"ns1"}, true}});
  run_at("a", "ns1", 35);
  run_at("b", "ns1", 30);
  run_at("c", "ns1", 25);
  await_counts("a", "ns1", 35, 35);
  await_counts("b", "ns1", 30, 30);
  await_counts("c", "ns1", 25, 25);
  std::string app = write_workload(
      "app", "ns1", "placement: {routing: {weights: {a: 15, b: 10, c: 10}, metric: workloads, domain: cluster}}");
  EXPECT_EQ(place_live(app), (std::set<std::string>{"a"}));
  submit(app);
  EXPECT_EQ(running_at("ns1", "app"), (std::set<std::string>{"a"}));
  // Weighted random (metric ""): the agent's draw is in the events, and
  // place --live with that draw decides the same cluster.
  std::string random = write_workload("random", "ns1", "placement: {routing: {weights: {a: 15, c: 10}}}");
  submit(random);
  std::set<std::string> ran = running_at("ns1", "random");
  std::string draw;
  json described = describe("ns1", "random");
  for (const auto& e : described["events"]) {
    std::string text = e["text"];
    size_t at = text.find("routing draw ");
    if (at != std::string::npos) draw = text.substr(at + 13, text.find(';', at) - (at + 13));
  }
  ASSERT_FALSE(draw.empty()) << describe("ns1", "random").dump(2);
  EXPECT_EQ(place_live(random, {"--draw", draw}), ran) << "draw " << draw;
}

TEST_F(LivePlacement, ClusterCountsStayHiddenUnlessDisclosed) {
  start({{"a", "{}", "{}", {"ns1"}, false}, {"b", "{}", "{}", {"ns1"}, true}});
  run_at("a", "ns1", 3);
  run_at("b", "ns1", 2);
  await_counts("a", "ns1", 3, 0);  // A's namespace counts, never its cluster-wide ones
  await_counts("b", "ns1", 2, 2);
}

}  // namespace
}  // namespace shoal::testing
