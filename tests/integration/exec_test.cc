// The exec backend with real agents: a workload runs as a
// process at a peer and its exit code is mirrored at the source; delete
// kills the whole process group, SIGKILL after the grace for what ignores
// SIGTERM; a target agent SIGKILLed and restarted re-adopts the running
// process, which finishes once; a process killed behind the agent's back is
// reported Failed. After each test no process started under its directory
// is left.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class Exec : public ::testing::Test {
 protected:
  void SetUp() override {
    // The source's own cluster is too small: the work runs at east.
    std::string tiny = dir_.path() + "/tiny.yaml";
    std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                           "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
    std::string exec = dir_.path() + "/east.yaml";
    std::ofstream(exec) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
                           "spec:\n  backend: exec\n"
                           "  nodes:\n  - {name: n, count: 2, capacity: {cpu: \"4\", memory: 8Gi}}\n";
    source_.init({"--cluster-config", tiny});
    east_.init({"--cluster-config", exec});
    for (AgentProcess* agent : {&source_, &east_}) {
      agent->set_config("heartbeatInterval", "300ms");
      agent->set_config("gcInterval", "1s");
      ASSERT_TRUE(agent->start()) << agent->name();
    }
    CommandResult token = east_.ctl({"invite", "create", "--to", source_.identity(), "--namespace", "default"});
    ASSERT_EQ(token.exit_code, 0) << token.err;
    CommandResult accepted = source_.ctl({"invite", "accept", token.out.substr(0, token.out.find('\n'))});
    ASSERT_EQ(accepted.exit_code, 0) << accepted.err;
    ASSERT_TRUE(wait_until(
        [&] {
          json peers = source_.ctl_json({"peers"});
          if (peers.is_null()) return false;
          for (const auto& p : peers["items"]) {
            if (p["state"] == "Active" && !p["capacity"].empty()) return true;
          }
          return false;
        },
        20s));
  }

  void TearDown() override {
    // Nothing this test started may outlive it: agents first, then every
    // process started under the test's directory (monitors and their work).
    source_.stop();
    east_.stop();
    EXPECT_TRUE(wait_until([&] { return processes_under(dir_.path()).empty(); }, 10s))
        << processes_under(dir_.path()).size() << " processes left under " << dir_.path();
    for (int pid : processes_under(dir_.path())) ::kill(pid, SIGKILL);
  }

  // Submits one workload; `spec` is the rest of its spec (YAML flow mapping).
  std::string submit(const std::string& name, const std::string& spec) {
    std::string path = dir_.path() + "/" + name + ".yaml";
    std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
                        << ", namespace: default}\nspec: {resources: {cpu: \"1\", memory: 100Mi}, "
                        << spec << "}\n";
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

  std::string replica_dir(const std::string& uid) { return east_.data_dir() + "/work/" + uid + "/0"; }

  // The workload's main process, from its monitor's file (pid start-time pid).
  int workload_pid(const std::string& uid) {
    std::istringstream in(read_file(replica_dir(uid) + "/monitor"));
    int monitor = 0, workload = 0;
    std::string start_time;
    in >> monitor >> start_time >> workload;
    return workload;
  }
  int monitor_pid(const std::string& uid) {
    std::istringstream in(read_file(replica_dir(uid) + "/monitor"));
    int monitor = 0;
    in >> monitor;
    return monitor;
  }

  TempDir dir_;
  AgentProcess source_{"source", dir_.path()};
  AgentProcess east_{"east", dir_.path()};
};

TEST_F(Exec, AWorkloadRunsAtAPeerAndItsExitCodeIsMirroredAtTheSource) {
  std::string uid = submit("hello", "command: [sh, -c, 'echo \"ran on $SHOAL_CLUSTER for $SHOAL_SOURCE_CLUSTER\"; exit 3']");
  ASSERT_FALSE(uid.empty());
  ASSERT_TRUE(wait_until([&] { return phase("hello") == "Failed"; }, 20s)) << describe("hello").dump(2);
  json status = describe("hello")["status"];
  EXPECT_EQ(status["cluster"], "east");
  EXPECT_EQ(status["exitCode"], 3);
  EXPECT_NE(status["reason"].get<std::string>().find("exited with code 3"), std::string::npos) << status.dump();
  EXPECT_EQ(read_file(replica_dir(uid) + "/output.log"), "ran on east for source\n");
  // The source reads it over the peer link.
  CommandResult at_source = source_.ctl({"logs", "default/hello"});
  EXPECT_EQ(at_source.exit_code, 0) << at_source.err;
  EXPECT_EQ(at_source.out, "ran on east for source\n");
  // The target's operator reads it with shoalctl logs (the copy it ran for
  // the source), also once the source has let it go and its reservation is
  // collected: the run row still names it. A replica that does not exist is
  // named.
  ASSERT_TRUE(wait_until(
      [&] {
        json held = east_.ctl_json({"get", "reservations"});
        return !held.is_null() && held["items"].empty();
      },
      20s));
  CommandResult logs = east_.ctl({"logs", "default/hello"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "ran on east for source\n");
  CommandResult missing = east_.ctl({"logs", "default/hello", "--replica", "2"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("replica: expected"), std::string::npos) << missing.err;
}

TEST_F(Exec, TheSourceFollowsTheOutputOfAPeersCopyInBoundedChunksUntilItEnds) {
  // 200 KiB of numbered lines, more than three LOG_CHUNKs, then a pause
  // and a last line: -f must carry on past the pause and stop at the end.
  std::string uid = submit("chatty",
                           "command: [sh, -c, 'seq 1 30000; while [ ! -e \"$HOME/go\" ]; do sleep 0.05; done; "
                           "echo last']");
  ASSERT_TRUE(wait_until([&] { return phase("chatty") == "Running"; }, 20s));
  ASSERT_TRUE(wait_until([&] { return read_file(replica_dir(uid) + "/output.log").size() > 160000; }, 20s));
  // The source's history says how east runs it: limits enforced or only accounted.
  EXPECT_TRUE(wait_until(
      [&] {
        json described = describe("chatty");  // (a temporary's member would dangle in the loop)
        for (const auto& event : described["events"]) {
          if (event["text"].get<std::string>().find("Running at east: exec: cpu and memory limits") !=
              std::string::npos) {
            return true;
          }
        }
        return false;
      },
      10s))
      << describe("chatty")["events"].dump(2);
  std::string expected;
  for (int i = 1; i <= 30000; ++i) expected += std::to_string(i) + "\n";
  CommandResult tail = source_.ctl({"logs", "default/chatty", "--tail", "2"});
  EXPECT_EQ(tail.exit_code, 0) << tail.err;
  EXPECT_EQ(tail.out, "29999\n30000\n");
  auto chunks_received = [&]() -> int64_t {
    json status = source_.ctl_json({"status"});
    return status.is_null() ? 0 : status["messages"]["receivedByType"].value("LOG_CHUNK", int64_t{0});
  };
  int64_t before = chunks_received();
  std::thread release([&] {
    // The work ends once the follower has read its three chunks of output
    // and asked at least twice more, finding nothing new (the pause).
    wait_until([&] { return chunks_received() >= before + 5; }, 20s);
    std::ofstream(replica_dir(uid) + "/go") << "";
  });
  CommandResult followed = source_.ctl({"logs", "default/chatty", "-f"});
  release.join();
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  EXPECT_EQ(followed.out, expected + "last\n");
  // Not to anyone else: the copy is the source's; east's own operator reads
  // it as the host, and a workload the source never had is not found.
  CommandResult unknown = source_.ctl({"logs", "default/nobody"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("not found"), std::string::npos) << unknown.err;
}

TEST_F(Exec, DeleteKillsTheWholeProcessGroupAndWhatIgnoresSigtermAfterTheGrace) {
  // The main shell and its child both ignore SIGTERM; only SIGKILL, after
  // the 1s grace, ends them.
  std::string uid = submit("stubborn",
                           "terminationGracePeriod: 1s, command: [sh, -c, 'trap \"\" TERM; sleep 1000 & "
                           "echo $! > child.pid; echo ready; wait; wait']");
  ASSERT_TRUE(wait_until([&] { return read_file(replica_dir(uid) + "/child.pid").find('\n') != std::string::npos; },
                         20s));
  int child = std::stoi(read_file(replica_dir(uid) + "/child.pid"));
  int main_process = workload_pid(uid);
  ASSERT_GT(main_process, 0);
  ASSERT_TRUE(alive(child));
  ASSERT_TRUE(wait_until([&] { return phase("stubborn") == "Running"; }, 10s));
  auto deleted_at = std::chrono::steady_clock::now();
  CommandResult deleted = source_.ctl({"delete", "workload", "default/stubborn"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  ASSERT_TRUE(wait_until([&] { return !alive(child) && !alive(main_process); }, 15s));
  // SIGTERM alone could not have ended them: the grace had to pass first.
  EXPECT_GE(std::chrono::steady_clock::now() - deleted_at, 1s);
  // The monitor records the status once it has reaped the group: await it.
  std::string exit_file = replica_dir(uid) + "/exit";
  EXPECT_TRUE(wait_until([&] { return !read_file(exit_file).empty(); }, 5s));
  EXPECT_EQ(read_file(exit_file), "signaled 9\n");
}

TEST_F(Exec, ATargetAgentKilledAndRestartedReadoptsItsProcessWhichFinishesOnce) {
  std::string uid = submit("steady",
                           "command: [sh, -c, 'echo started >> \"$HOME/../starts\"; "
                           "while [ ! -e \"$HOME/go\" ]; do sleep 0.05; done; echo finished']");
  ASSERT_TRUE(wait_until([&] { return phase("steady") == "Running"; }, 20s));
  int monitor = monitor_pid(uid);
  ASSERT_GT(monitor, 0);
  east_.kill_hard();
  ASSERT_TRUE(alive(monitor)) << "the monitor outlives its agent";
  ASSERT_TRUE(east_.start());
  // Re-adopted, not started again: the same monitor, one start.
  std::ofstream(replica_dir(uid) + "/go") << "";
  ASSERT_TRUE(wait_until([&] { return phase("steady") == "Succeeded"; }, 20s)) << describe("steady").dump(2);
  EXPECT_EQ(read_file(east_.data_dir() + "/work/" + uid + "/starts"), "started\n");
  EXPECT_EQ(read_file(replica_dir(uid) + "/output.log"), "finished\n");
}

TEST_F(Exec, AProcessKilledBehindTheAgentsBackIsReportedFailed) {
  std::string uid = submit("victim", "command: [sleep, '1000']");
  ASSERT_TRUE(wait_until([&] { return phase("victim") == "Running" && workload_pid(uid) > 0; }, 20s));
  ASSERT_EQ(::kill(workload_pid(uid), SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return phase("victim") == "Failed"; }, 20s));
  json status = describe("victim")["status"];
  EXPECT_EQ(status["exitCode"], 137);
  EXPECT_NE(status["reason"].get<std::string>().find("killed by signal 9"), std::string::npos) << status.dump();
}

TEST_F(Exec, AProgramThatCannotStartIsReportedFailedWithTheReason) {
  submit("typo", "command: [no-such-program-here]");
  ASSERT_TRUE(wait_until([&] { return phase("typo") == "Failed"; }, 20s));
  json status = describe("typo")["status"];
  EXPECT_EQ(status["exitCode"], 127);
  EXPECT_NE(status["reason"].get<std::string>().find("no-such-program-here"), std::string::npos) << status.dump();
}

}  // namespace
}  // namespace shoal::testing
