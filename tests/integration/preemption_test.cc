// Preemption with real agents and the exec backend: a target lends its
// room to a preemptible guest and takes it back for its own urgent work —
// the fewest guest processes are stopped with their grace, the urgent one
// starts once they are gone, and the guest's stopped copy is placed again
// elsewhere and finishes; a guest's claim above its invitation's ceiling is
// held to it there; with three targets full of a source's own low-priority
// work, one high-priority workload stops exactly one process, at one target;
// a lender killed while its victim runs out its grace never starts its own
// work beside it after the restart; a running workload whose priority is
// lowered becomes a victim; a pending workload takes a cluster invited
// later; an evicted workload queues behind what waited before it.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

#include "harness.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A cluster manifest: the exec backend, one node of `cpu`, preemption within queues.
std::string exec_cluster(const std::string& dir, const std::string& name, const std::string& cpu) {
  std::string path = dir + "/" + name + ".yaml";
  std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: " << name
                      << "}\nspec:\n  backend: exec\n  preemption: {withinQueue: LowerPriority}\n"
                      << "  nodes:\n  - {name: n, count: 1, capacity: {cpu: \"" << cpu
                      << "\", memory: 8Gi}}\n";
  return path;
}

std::string tiny_cluster(const std::string& dir) {
  std::string path = dir + "/tiny.yaml";
  std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                         "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
  return path;
}

// Workloads of 1 cpu that run `seconds`, priority `priority`; a stopped
// one ends within a second of its SIGTERM.
std::string workloads(const std::string& dir, const std::string& file, const std::vector<std::string>& names,
                      int priority, int seconds) {
  std::string path = dir + "/" + file;
  std::ofstream out(path);
  for (const std::string& name : names) {
    out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
        << ", namespace: default}\nspec:\n  priority: " << priority
        << "\n  resources: {cpu: \"1\", memory: 100Mi}\n  terminationGracePeriod: 5s\n"
        << "  command: [sh, -c, 'trap \"exit 143\" TERM; sleep " << seconds << " & wait']\n";
  }
  return path;
}

void invite(AgentProcess& target, AgentProcess& source, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"invite", "create", "--to", source.identity(), "--namespace", "default"};
  args.insert(args.end(), extra.begin(), extra.end());
  CommandResult token = target.ctl(args);
  ASSERT_EQ(token.exit_code, 0) << token.err;
  CommandResult accepted = source.ctl({"invite", "accept", token.out.substr(0, token.out.find('\n'))});
  ASSERT_EQ(accepted.exit_code, 0) << accepted.err;
}

bool peers_active(AgentProcess& agent, size_t count) {
  json peers = agent.ctl_json({"peers"});
  if (peers.is_null()) return false;
  size_t active = 0;
  for (const auto& p : peers["items"]) active += p["state"] == "Active" && !p["capacity"].empty();
  return active >= count;
}

json describe(AgentProcess& agent, const std::string& name) {
  return agent.ctl_json({"describe", "workload", "default/" + name});
}

std::string phase(AgentProcess& agent, const std::string& name) {
  json described = describe(agent, name);
  return described.is_null() ? "" : described["status"]["phase"].get<std::string>();
}

int64_t stopped_at(AgentProcess& agent) {
  json status = agent.ctl_json({"status"});
  return status.is_null() ? -1 : status["preemptions"]["workloadsStopped"].get<int64_t>();
}

// Copies Running at `agent` right now, by name.
std::map<std::string, int> running_copies(AgentProcess& agent) {
  std::map<std::string, int> out;
  json held = agent.ctl_json({"get", "reservations"});
  if (held.is_null()) return out;
  for (const auto& r : held["items"]) {
    if (r["phase"] == "Running") out[r["name"].get<std::string>()] += 1;
  }
  return out;
}

class Preemption : public ::testing::Test {
 protected:
  void start(AgentProcess& agent, const std::string& cluster) {
    agent.init({"--cluster-config", cluster});
    agent.set_config("heartbeatInterval", "300ms");
    agent.set_config("gcInterval", "1s");
    ASSERT_TRUE(agent.start()) << agent.name();
  }
  void TearDown() override {
    // The exec backend's processes outlive their agent (a restarted agent
    // re-adopts them): the test's own go with it.
    for (int pid : processes_under(dir_.path())) ::kill(pid, SIGKILL);
  }
  TempDir dir_;
};

TEST_F(Preemption, ATargetTakesBackWhatAPreemptibleGuestBorrowed) {
  AgentProcess source("source", dir_.path()), lender("lender", dir_.path()), other("other", dir_.path());
  start(source, tiny_cluster(dir_.path()));
  start(lender, exec_cluster(dir_.path(), "lender", "2"));
  start(other, exec_cluster(dir_.path(), "other", "2"));
  invite(lender, source, {"--preemptible", "--max-priority", "10"});
  invite(other, source);
  ASSERT_TRUE(wait_until([&] { return peers_active(source, 2); }, 20s));
  json invitations = lender.ctl_json({"invite", "list"});
  ASSERT_FALSE(invitations.is_null());
  EXPECT_EQ(invitations["items"][0]["limits"]["preemptible"], true);
  EXPECT_EQ(invitations["items"][0]["limits"]["maxPriority"], 10);

  // Four guests of priority 50 fill both clusters.
  std::vector<std::string> guests = {"guest-0", "guest-1", "guest-2", "guest-3"};
  ASSERT_EQ(source.ctl({"submit", "-f", workloads(dir_.path(), "guests.yaml", guests, 50, 6)}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return running_copies(lender).size() == 2 && running_copies(other).size() == 2; }, 30s));
  json held = lender.ctl_json({"get", "reservations"});
  for (const auto& r : held["items"]) EXPECT_EQ(r["priority"], 10) << "held to the lender's ceiling";

  // The lender's own work of priority 20 needs one guest's cpu.
  ASSERT_EQ(lender.ctl({"submit", "-f", workloads(dir_.path(), "own.yaml", {"own"}, 20, 30)}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return phase(lender, "own") == "Running"; }, 20s))
      << describe(lender, "own").dump();
  EXPECT_EQ(stopped_at(lender), 1) << "the fewest guest copies that make room";
  std::map<std::string, int> at_lender = running_copies(lender);
  EXPECT_EQ(at_lender["own"], 1);
  int guests_there = 0;
  for (const std::string& name : guests) guests_there += at_lender[name];
  EXPECT_EQ(guests_there, 1);

  // Every guest finishes, the stopped one placed again as a new epoch; no
  // guest ever had two copies running.
  bool all_done = wait_until(
      [&] {
        std::map<std::string, int> running = running_copies(lender);
        for (const auto& [name, count] : running_copies(other)) running[name] += count;
        for (const auto& [name, count] : running) EXPECT_LE(count, 1) << name;
        for (const std::string& name : guests) {
          if (phase(source, name) != "Succeeded") return false;
        }
        return true;
      },
      60s);
  EXPECT_TRUE(all_done);
  int disrupted = 0;
  for (const std::string& name : guests) {
    json described = describe(source, name);
    ASSERT_FALSE(described.is_null());
    disrupted += described["status"]["disruptions"].get<int>();
    EXPECT_EQ(described["status"]["restarts"], 0) << name;
  }
  EXPECT_EQ(disrupted, 1);
}

TEST_F(Preemption, OneHighPriorityWorkloadStopsOneProcessAtOneOfThreeFullTargets) {
  AgentProcess source("source", dir_.path());
  std::vector<std::unique_ptr<AgentProcess>> targets;
  start(source, tiny_cluster(dir_.path()));
  for (const char* name : {"t1", "t2", "t3"}) {
    targets.push_back(std::make_unique<AgentProcess>(name, dir_.path()));
    start(*targets.back(), exec_cluster(dir_.path(), name, "2"));
    invite(*targets.back(), source);
  }
  ASSERT_TRUE(wait_until([&] { return peers_active(source, 3); }, 20s));
  std::vector<std::string> low;
  for (int i = 0; i < 6; ++i) low.push_back("low-" + std::to_string(i));
  ASSERT_EQ(source.ctl({"submit", "-f", workloads(dir_.path(), "low.yaml", low, 0, 120)}).exit_code, 0);
  ASSERT_TRUE(wait_until(
      [&] {
        size_t running = 0;
        for (auto& target : targets) running += running_copies(*target).size();
        return running == 6;
      },
      30s));
  ASSERT_EQ(source.ctl({"submit", "-f", workloads(dir_.path(), "high.yaml", {"high"}, 100, 120)}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return phase(source, "high") == "Running"; }, 20s))
      << describe(source, "high").dump();
  int64_t stopped = 0;
  int preempting = 0;
  for (auto& target : targets) {
    int64_t here = stopped_at(*target);
    stopped += here;
    preempting += here > 0;
  }
  EXPECT_EQ(preempting, 1) << "only the approved target preempts";
  EXPECT_EQ(stopped, 1) << "and only the victim it needed";
}

// Whether a process of this test whose command line holds `needle` lives.
bool process_lives(const std::string& dir, const std::string& needle) {
  for (int pid : processes_under(dir)) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos && alive(pid)) return true;
  }
  return false;
}

// The lender is killed while the guest it preempted still runs out its
// grace period (it ignores SIGTERM). After the restart the guest's process
// is stopped again and keeps its room: the lender's own work never runs
// beside it and starts once it is gone, and the guest is reported Preempted.
TEST_F(Preemption, ARestartDuringAVictimsGraceNeverRunsThePreemptorBesideIt) {
  AgentProcess source("source", dir_.path()), lender("lender", dir_.path());
  start(source, tiny_cluster(dir_.path()));
  start(lender, exec_cluster(dir_.path(), "lender", "1"));
  invite(lender, source, {"--preemptible"});
  ASSERT_TRUE(wait_until([&] { return peers_active(source, 1); }, 20s));
  std::string guest = dir_.path() + "/stubborn.yaml";
  std::ofstream(guest) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: stubborn, namespace: default}\n"
                          "spec:\n  resources: {cpu: \"1\", memory: 100Mi}\n  terminationGracePeriod: 8s\n"
                          "  command: [sh, -c, 'trap \"\" TERM; sleep 301']\n";
  ASSERT_EQ(source.ctl({"submit", "-f", guest}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return running_copies(lender)["stubborn"] == 1; }, 30s));
  ASSERT_TRUE(wait_until([&] { return process_lives(dir_.path(), "sleep 301"); }, 10s));

  ASSERT_EQ(lender.ctl({"submit", "-f", workloads(dir_.path(), "own.yaml", {"own"}, 20, 30)}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return stopped_at(lender) == 1; }, 20s));
  lender.kill_hard();
  ASSERT_TRUE(lender.start());
  ASSERT_TRUE(process_lives(dir_.path(), "sleep 301")) << "restarted within the guest's grace period";

  bool overlapped = false;
  ASSERT_TRUE(wait_until(
      [&] {
        bool own_runs = phase(lender, "own") == "Running";
        bool guest_lives = process_lives(dir_.path(), "sleep 301");
        overlapped = overlapped || (own_runs && guest_lives);
        return !guest_lives;
      },
      30s))
      << "the guest's process outlived two grace periods";
  EXPECT_FALSE(overlapped) << "the lender's own work ran beside the process it preempted";
  EXPECT_TRUE(wait_until([&] { return phase(lender, "own") == "Running"; }, 30s))
      << describe(lender, "own").dump();
  EXPECT_TRUE(wait_until([&] { return describe(source, "stubborn")["status"]["disruptions"] == 1; }, 20s))
      << describe(source, "stubborn").dump();
  json events = source.ctl_json({"describe", "workload", "default/stubborn"});
  EXPECT_NE(events.dump().find("Preempted"), std::string::npos) << events.dump();
}

// `shoalctl schedule --running`: the same plan offline.
// A running workload whose priority an operator lowers below a waiting
// one's becomes its victim: the waiting one runs, the lowered one is
// stopped as a disruption (not its own failure), the other keeps running.
TEST_F(Preemption, LoweringARunningWorkloadsPriorityLetsAWaitingOnePreemptIt) {
  AgentProcess source("source", dir_.path());
  AgentProcess target("t1", dir_.path());
  start(source, tiny_cluster(dir_.path()));
  start(target, exec_cluster(dir_.path(), "t1", "2"));
  invite(target, source);
  ASSERT_TRUE(wait_until([&] { return peers_active(source, 1); }, 20s));
  ASSERT_EQ(source.ctl({"submit", "-f", workloads(dir_.path(), "running.yaml", {"kept", "lowered"}, 50, 120)})
                .exit_code,
            0);
  ASSERT_TRUE(wait_until([&] { return running_copies(target).size() == 2; }, 30s));
  ASSERT_EQ(source.ctl({"submit", "-f", workloads(dir_.path(), "waiting.yaml", {"waiting"}, 10, 120)}).exit_code,
            0);
  ASSERT_TRUE(wait_until([&] { return describe(source, "waiting")["status"].value("reason", "") != ""; }, 20s));
  EXPECT_EQ(phase(source, "waiting"), "Pending") << "below both: it waits";
  EXPECT_EQ(stopped_at(target), 0);

  CommandResult patched = source.ctl({"patch", "workload", "default/lowered", "--priority", "0"});
  ASSERT_EQ(patched.exit_code, 0) << patched.err;
  ASSERT_TRUE(wait_until([&] { return phase(source, "waiting") == "Running"; }, 20s))
      << describe(source, "waiting").dump(2) << "\n" << describe(source, "lowered").dump(2);
  json lowered = describe(source, "lowered");
  EXPECT_NE(lowered["status"]["phase"], "Running") << lowered.dump(2);
  EXPECT_NE(lowered["status"]["phase"], "Failed") << lowered.dump(2);
  EXPECT_EQ(lowered["status"]["disruptions"], 1) << lowered.dump(2);
  EXPECT_EQ(phase(source, "kept"), "Running");
  EXPECT_EQ(stopped_at(target), 1) << "only the lowered one was stopped";
  std::map<std::string, int> running = running_copies(target);
  EXPECT_EQ(running, (std::map<std::string, int>{{"kept", 1}, {"waiting", 1}}));
}

// A workload no cluster can take waits Pending, and is placed as soon as
// a cluster that can invites its source.
TEST_F(Preemption, APendingWorkloadTakesAClusterInvitedAfterItWasSubmitted) {
  AgentProcess source("source", dir_.path());
  start(source, tiny_cluster(dir_.path()));
  ASSERT_EQ(source.ctl({"submit", "-f", workloads(dir_.path(), "early.yaml", {"early"}, 0, 120)}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return describe(source, "early")["status"].value("reason", "") != ""; }, 20s));
  EXPECT_EQ(phase(source, "early"), "Pending") << describe(source, "early").dump(2);

  AgentProcess target("late", dir_.path());
  start(target, exec_cluster(dir_.path(), "late", "2"));
  invite(target, source);
  ASSERT_TRUE(wait_until([&] { return phase(source, "early") == "Running"; }, 30s))
      << describe(source, "early").dump(2);
  EXPECT_EQ(describe(source, "early")["status"]["cluster"], "late");
  EXPECT_EQ(running_copies(target), (std::map<std::string, int>{{"early", 1}}));
}

// An evicted workload goes back to the end of its line: at another
// cluster it queues behind what waited there before it (as Kueue requeues
// by eviction time by default), and the cluster that evicted it does not
// ask it back for a while.
TEST_F(Preemption, AnEvictedWorkloadQueuesBehindWhatWaitedBeforeIt) {
  AgentProcess source("source", dir_.path());
  AgentProcess t1("t1", dir_.path());
  AgentProcess t2("t2", dir_.path());
  start(source, tiny_cluster(dir_.path()));
  std::map<std::string, AgentProcess*> targets = {{"t1", &t1}, {"t2", &t2}};
  for (auto& [name, target] : targets) {
    start(*target, exec_cluster(dir_.path(), name, "1"));
    invite(*target, source);
  }
  ASSERT_TRUE(wait_until([&] { return peers_active(source, 2); }, 20s));
  ASSERT_EQ(source.ctl({"submit", "-f", workloads(dir_.path(), "first.yaml", {"evicted", "other"}, 0, 120)})
                .exit_code,
            0);
  ASSERT_TRUE(wait_until([&] { return phase(source, "evicted") == "Running" && phase(source, "other") == "Running"; },
                         30s));
  auto waiting_everywhere = [&](const std::string& name) {
    std::string reason = describe(source, name)["status"].value("reason", "");
    return reason.find("t1=NoCapacity") != std::string::npos && reason.find("t2=NoCapacity") != std::string::npos;
  };
  for (std::string name : {"early", "late"}) {  // queued in this order at both
    ASSERT_EQ(source.ctl({"submit", "-f", workloads(dir_.path(), name + ".yaml", {name}, 0, 120)}).exit_code, 0);
    ASSERT_TRUE(wait_until([&] { return waiting_everywhere(name); }, 20s)) << describe(source, name).dump(2);
  }
  std::string evictor = describe(source, "evicted")["status"]["cluster"];
  std::string elsewhere = evictor == "t1" ? "t2" : "t1";
  ASSERT_EQ(targets[evictor]->ctl({"delete", "workload", "default/evicted"}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return phase(source, "early") == "Running"; }, 20s)) << describe(source, "early").dump(2);
  EXPECT_EQ(describe(source, "early")["status"]["cluster"], evictor) << "the first in line there";
  // Placed again, the evicted workload asks only the other cluster, and
  // waits there behind the workload that waited before it.
  ASSERT_TRUE(wait_until(
      [&] {
        json evicted = describe(source, "evicted");
        std::string reason = evicted["status"].value("reason", "");
        return evicted["status"]["disruptions"] == 1 && reason.find(elsewhere + "=NoCapacity") != std::string::npos;
      },
      20s))
      << describe(source, "evicted").dump(2);
  ASSERT_EQ(targets[elsewhere]->ctl({"delete", "workload", "default/other"}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return phase(source, "late") == "Running"; }, 20s))
      << describe(source, "late").dump(2) << "\n" << describe(source, "evicted").dump(2);
  EXPECT_EQ(describe(source, "late")["status"]["cluster"], elsewhere);
  EXPECT_NE(phase(source, "evicted"), "Running") << "it queued behind: the freed room went to the earlier one";
}

TEST(PreemptionOffline, ScheduleShowsWhichRunningWorkAPendingWorkloadStops) {
  TempDir dir;
  std::string cluster = exec_cluster(dir.path(), "c", "4");
  std::string running = dir.path() + "/running.yaml";
  {
    std::ofstream out(running);
    for (const char* name : {"old", "new"}) {  // "new" started last
      out << "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
          << "}\nspec: {resources: {cpu: \"2\"}}\n";
    }
  }
  std::string pending = dir.path() + "/pending.yaml";
  std::ofstream(pending) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: urgent}\n"
                            "spec: {priority: 5, resources: {cpu: \"2\"}}\n"
                            "---\napiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: polite}\n"
                            "spec: {priority: 5, preemptionPolicy: Never, resources: {cpu: \"2\"}}\n";
  CommandResult result = run_command({bin_path("shoalctl"), "schedule", "--cluster", cluster,
                                      "--running", running, "-f", pending, "-o", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  json plan = json::parse(result.out);
  ASSERT_EQ(plan["workloads"].size(), 2u);
  EXPECT_EQ(plan["workloads"][0]["admitted"], true);
  EXPECT_EQ(plan["workloads"][0]["preempts"], json::array({"default/new"})) << result.out;
  EXPECT_EQ(plan["workloads"][1]["admitted"], false) << "preemptionPolicy: Never waits";
  EXPECT_FALSE(plan["workloads"][1].contains("preempts"));
  CommandResult table = run_command({bin_path("shoalctl"), "schedule", "--cluster", cluster,
                                     "--running", running, "-f", pending});
  EXPECT_NE(table.out.find("default/urgent (priority 5) preempts default/new"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace shoal::testing
