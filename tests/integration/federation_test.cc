// The walking skeleton's acceptance scenarios, with real shoald processes on
// 127.0.0.1 driven by shoalctl.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "harness.h"
#include "store/sqlite/sqlite_store.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class Federation : public ::testing::Test {
 protected:
  void start_agents(int count) {
    for (int i = 0; i < count; ++i) {
      agents_.push_back(std::make_unique<AgentProcess>("c" + std::to_string(i), dir_.path()));
      agents_.back()->init();
      ASSERT_TRUE(agents_.back()->start()) << "agent " << i << " did not start";
    }
    std::vector<AgentProcess*> raw;
    for (auto& a : agents_) raw.push_back(a.get());
    invite_full_mesh(raw, "default");
    // Peered means every agent has heard from every other.
    ASSERT_TRUE(wait_until(
        [&] {
          for (auto& agent : agents_) {
            json peers = agent->ctl_json({"peers"});
            if (peers.is_null()) return false;
            int active = 0;
            for (const auto& p : peers["items"]) active += p["state"] == "Active";
            if (active != count - 1) return false;
          }
          return true;
        },
        20s));
  }

  json workloads(AgentProcess& agent) { return agent.ctl_json({"get", "workloads"}); }

  bool all_finished(AgentProcess& agent, size_t expected) {
    json list = workloads(agent);
    if (list.is_null() || list["items"].size() != expected) return false;
    for (const auto& w : list["items"]) {
      std::string phase = w["status"]["phase"];
      if (phase != "Succeeded" && phase != "Failed") return false;
    }
    return true;
  }

  // uid -> clusters whose reservations show it ran (Running or finished).
  // Where each workload ran, from every agent's durable run history (one
  // row per copy bound there; reservations would do only until GC collects
  // them). Read while the agents run: WAL readers never block them.
  std::map<std::string, std::vector<std::string>> runs_by_uid() {
    std::map<std::string, std::vector<std::string>> out;
    for (auto& agent : agents_) {
      auto store = store::sqlite::SqliteStore::open(agent->data_dir() + "/state.db");
      EXPECT_TRUE(store.is_ok()) << store.status().message();
      if (!store.is_ok()) continue;
      auto runs = (*store)->load_runs();
      EXPECT_TRUE(runs.is_ok()) << runs.status().message();
      if (!runs.is_ok()) continue;
      for (const auto& run : *runs) out[run.uid].push_back(agent->name());
    }
    return out;
  }

  // Where each workload holds resources now (Bound, Running; from the
  // agents' reservations).
  std::map<std::string, std::vector<std::string>> held_by_uid() {
    std::map<std::string, std::vector<std::string>> out;
    for (auto& agent : agents_) {
      json reservations = agent->ctl_json({"get", "reservations"});
      EXPECT_FALSE(reservations.is_null());
      if (reservations.is_null()) continue;
      for (const auto& r : reservations["items"]) {
        std::string phase = r["phase"];
        if (phase == "Bound" || phase == "Running") out[r["uid"]].push_back(agent->name());
      }
    }
    return out;
  }

  void expect_no_overcommit() {
    for (auto& agent : agents_) {
      json status = agent->ctl_json({"status"});
      ASSERT_FALSE(status.is_null());
      for (const auto& node : status["nodes"]) {
        EXPECT_FALSE(node["overCommitted"].get<bool>())
            << agent->name() << " " << node["name"] << " peak " << node["peakAllocated"];
      }
    }
  }

  TempDir dir_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

TEST_F(Federation, ThirtyWorkloadsRunOnceEachSpreadAcrossClusters) {
  start_agents(3);
  // 30 x 8 cpu: three default clusters (4 x 8 cpu each) run 12 at once.
  std::string manifest = write_workloads(dir_.path(), "job", 30, "8", "1s");
  CommandResult submitted = agents_[0]->ctl({"submit", "-f", manifest});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;

  ASSERT_TRUE(wait_until([&] { return all_finished(*agents_[0], 30); }, 120s))
      << workloads(*agents_[0]).dump(1);

  json list = workloads(*agents_[0]);
  std::set<std::string> clusters_used;
  auto runs = runs_by_uid();
  for (const auto& w : list["items"]) {
    EXPECT_EQ(w["status"]["phase"], "Succeeded") << w.dump();
    std::string uid = w["metadata"]["uid"];
    std::string cluster = w["status"]["cluster"];
    clusters_used.insert(cluster);
    // Every agent's view agrees: it ran in exactly one cluster, the one the source shows.
    ASSERT_EQ(runs[uid].size(), 1u) << uid;
    EXPECT_EQ(runs[uid].front(), cluster) << uid;
  }
  EXPECT_EQ(clusters_used.size(), 3u) << "work should spread over every cluster";
  expect_no_overcommit();
}

TEST_F(Federation, SubmittingAgentKilledMidFlightLosesNothingAndRunsNothingTwice) {
  start_agents(3);
  std::string manifest = write_workloads(dir_.path(), "crash", 20, "8", "2s");
  ASSERT_EQ(agents_[0]->ctl({"submit", "-f", manifest}).exit_code, 0);
  // Kill while some run remotely and others still wait for room.
  ASSERT_TRUE(wait_until(
      [&] {
        json list = workloads(*agents_[0]);
        if (list.is_null()) return false;
        int remote_running = 0;
        for (const auto& w : list["items"]) {
          remote_running += w["status"]["phase"] == "Running" && w["status"]["cluster"] != "c0";
        }
        return remote_running >= 2;
      },
      30s));
  agents_[0]->kill_hard();
  ASSERT_TRUE(agents_[0]->start());

  ASSERT_TRUE(wait_until([&] { return all_finished(*agents_[0], 20); }, 120s))
      << workloads(*agents_[0]).dump(1);
  auto runs = runs_by_uid();
  json listed = workloads(*agents_[0]);
  for (const auto& w : listed["items"]) {
    EXPECT_EQ(w["status"]["phase"], "Succeeded") << w.dump();
    EXPECT_EQ(runs[w["metadata"]["uid"]].size(), 1u) << w.dump();
  }
  expect_no_overcommit();
}

TEST_F(Federation, DeleteStopsEveryCopyAndForgetsTheWorkload) {
  start_agents(2);
  AgentProcess& source = *agents_[0];
  // Four 8-cpu jobs on two default 4x8-cpu clusters: both clusters run some.
  std::string file = write_workloads(dir_.path(), "long", 4, "8", "600s");
  ASSERT_EQ(source.ctl({"submit", "-f", file}).exit_code, 0);
  ASSERT_TRUE(wait_until(
      [&] {
        json list = workloads(source);
        if (list.is_null() || list["items"].size() != 4) return false;
        for (const auto& w : list["items"]) {
          if (w["status"]["phase"] != "Running") return false;
        }
        return true;
      },
      30s));
  for (int i = 0; i < 4; ++i) {
    CommandResult deleted = source.ctl({"delete", "workload", "default/long-" + std::to_string(i)});
    ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  }
  EXPECT_TRUE(wait_until([&] { return workloads(source)["items"].empty(); }, 20s));
  EXPECT_TRUE(wait_until([&] { return held_by_uid().empty(); }, 20s))
      << "a copy still runs somewhere";
  CommandResult again = source.ctl({"delete", "workload", "default/long-0"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("not found"), std::string::npos) << again.err;
}

TEST_F(Federation, BadManifestIsRefusedWithExitCodeTwoAndNothingStored) {
  start_agents(1);
  std::string path = dir_.path() + "/bad.yaml";
  {
    std::ofstream out(path);
    out << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: good}\n"
           "spec: {resources: {cpu: \"1\"}}\n---\n"
           "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: bad}\n"
           "spec: {resources: {cpu: \"four\"}}\n";
  }
  CommandResult result = agents_[0]->ctl({"submit", "-f", path});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("spec.resources.cpu"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("four"), std::string::npos) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << "one line";
  json list = workloads(*agents_[0]);
  ASSERT_FALSE(list.is_null());
  EXPECT_TRUE(list["items"].empty()) << "the good document must not be stored either";
}

// A long list is read a page at a time (each page one short
// request, so the agent stays responsive); --limit and --continue page it
// for the user, in namespace/name order, and nothing is listed twice.
TEST_F(Federation, ListingPagesThroughEveryWorkloadOnceInOrder) {
  start_agents(1);
  std::string path = dir_.path() + "/many.yaml";
  {
    std::ofstream out(path);
    for (const char* ns : {"default", "team-b"}) {
      for (int i = 0; i < 7; ++i) {
        out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: w" << i
            << ", namespace: " << ns << "}\nspec: {resources: {cpu: \"1\"}, duration: 1h}\n";
      }
    }
  }
  ASSERT_EQ(agents_[0]->ctl({"submit", "-f", path}).exit_code, 0);
  auto names = [](const json& list) {
    std::vector<std::string> out;
    for (const auto& w : list["items"]) {
      out.push_back(w["metadata"]["namespace"].get<std::string>() + "/" +
                    w["metadata"]["name"].get<std::string>());
    }
    return out;
  };
  // In chunks of 3 from the agent, all 14 come back, each once, in order.
  json all = agents_[0]->ctl_json({"get", "workloads", "-A", "--chunk-size", "3"});
  std::vector<std::string> listed = names(all);
  ASSERT_EQ(listed.size(), 14u);
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()).size(), 14u);
  EXPECT_FALSE(all.contains("continue"));
  // --limit stops early and says where to go on; --continue goes on there.
  json first = agents_[0]->ctl_json({"get", "workloads", "-A", "--limit", "5", "--chunk-size", "2"});
  ASSERT_EQ(first["items"].size(), 5u);
  ASSERT_TRUE(first.contains("continue"));
  json rest = agents_[0]->ctl_json(
      {"get", "workloads", "-A", "--continue", first["continue"].get<std::string>()});
  std::vector<std::string> paged = names(first);
  for (const auto& name : names(rest)) paged.push_back(name);
  EXPECT_EQ(paged, listed);
  // One namespace: only its own, even when a page ends at its last one.
  json team = agents_[0]->ctl_json({"get", "workloads", "-n", "team-b", "--chunk-size", "7"});
  ASSERT_EQ(team["items"].size(), 7u);
  for (const auto& w : team["items"]) EXPECT_EQ(w["metadata"]["namespace"], "team-b");
  CommandResult table = agents_[0]->ctl({"get", "workloads", "--limit", "2"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.err.find("--continue default/w1"), std::string::npos) << table.err;
}

TEST_F(Federation, UnknownCommandLineFlagIsBadUsage) {
  start_agents(1);
  EXPECT_EQ(agents_[0]->ctl({"get", "workloads", "--bogus"}).exit_code, 2);
  EXPECT_EQ(agents_[0]->ctl({"describe", "workload", "no-slash"}).exit_code, 2);
  EXPECT_EQ(agents_[0]->ctl({"invite", "accept", "shoal-invite:v1:AAAA"}).exit_code, 2);
}

}  // namespace
}  // namespace shoal::testing
