// ExecRunner against real processes (through shoal-exec-monitor, built
// beside this test): what a runner must do that the agent-level tests do not
// reach directly. Every process a test starts is gone when it ends.
#include "agent/cluster/exec/exec_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace shoal::cluster {
namespace {

using namespace std::chrono_literals;

class ExecRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/shoal-exec-runner-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    // Whatever a test left running is killed by its group, then removed.
    for (const auto& uid : std::filesystem::directory_iterator(root_)) {
      for (const auto& replica : std::filesystem::directory_iterator(uid.path())) {
        std::ifstream in(replica.path() / "monitor");
        int monitor = 0, workload = 0;
        std::string start;
        if (in >> monitor >> start >> workload) {
          if (workload > 0) ::kill(-workload, SIGKILL);
          ::kill(monitor, SIGKILL);
        }
      }
    }
    std::filesystem::remove_all(root_);
  }

  ExecOptions options() const {
    ExecOptions o;
    o.work_root = root_;
    o.monitor_path = default_monitor_path();
    o.cluster_name = "here";
    return o;
  }

  static LaunchRequest request(const std::string& source, const std::string& uid,
                               std::vector<std::string> command) {
    LaunchRequest r;
    r.key = source + "/" + uid;
    r.uid = uid;
    r.epoch = 1;
    r.source_cluster = source;
    r.spec.namespace_name = "default";
    r.spec.name = uid;
    r.spec.command = std::move(command);
    r.spec.termination_grace = 0s;
    r.nodes = {"n-0"};
    return r;
  }

  // Observes until an event of `kind` for `key` comes, within 10 s.
  static bool await_event(ExecRunner& runner, const std::string& key, WorkloadEventKind kind) {
    auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      for (const auto& event : runner.observe(std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()))) {
        if (event.key == key && event.kind == kind) return true;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  // Reads the replica's output until it holds `text`, within 10 s.
  static bool await_output(const ExecRunner& runner, const std::string& key, const std::string& text) {
    auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      auto chunk = runner.read_log(key, 0, 0, 1 << 16);
      if (chunk.is_ok() && chunk->data == text) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  // Stops `key` at once and waits for it to be gone: stop() may find the
  // work already ended (true) when the monitor is quicker than the runner's
  // own check; otherwise a kStopped must follow.
  static bool stopped(ExecRunner& runner, const std::string& key) {
    return runner.stop(key, 0s) || await_event(runner, key, WorkloadEventKind::kStopped);
  }

  // What the replica's monitor wrote when its command ended ("" before).
  std::string exit_of(const std::string& uid) const {
    std::ifstream in(root_ + "/" + uid + "/0/exit");
    std::string line;
    std::getline(in, line);
    return line;
  }

  int monitor_of(const std::string& uid) const {
    std::ifstream in(root_ + "/" + uid + "/0/monitor");
    int monitor = 0;
    in >> monitor;
    return monitor;
  }

  std::string root_;
};

TEST_F(ExecRunnerTest, AnotherSourceNamingTheSameUidNeitherReplacesNorReadsIt) {
  ExecRunner runner(options());
  ASSERT_TRUE(runner.launch(request("alice", "u1", {"sh", "-c", "echo mine; exec sleep 100"})).is_ok());
  ASSERT_TRUE(await_output(runner, "alice/u1", "mine\n"));
  // Mallory's copy of "u1" is not Alice's: nothing to read, nothing to start over.
  auto read = runner.read_log("mallory/u1", 0, 0, 1 << 16);
  EXPECT_EQ(read.status().code(), ErrorCode::kNotFound) << read.status().message();
  Status launched = runner.launch(request("mallory", "u1", {"sh", "-c", "echo stolen"}));
  EXPECT_EQ(launched.code(), ErrorCode::kAlreadyExists) << launched.message();
  EXPECT_TRUE(await_output(runner, "alice/u1", "mine\n"));
  EXPECT_TRUE(stopped(runner, "alice/u1"));
  EXPECT_EQ(exit_of("u1"), "signaled 15");
}

TEST_F(ExecRunnerTest, ACopyReleasedBeforeARestartedAgentAdoptedItIsStillStopped) {
  {
    ExecRunner before(options());
    ASSERT_TRUE(before.launch(request("alice", "u2", {"sleep", "100"})).is_ok());
    ASSERT_TRUE(std::filesystem::exists(root_ + "/u2/0/lock"));
  }  // the agent is gone; the monitor runs on
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (monitor_of("u2") == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  int monitor = monitor_of("u2");
  ASSERT_GT(monitor, 0);
  ASSERT_EQ(::kill(monitor, 0), 0);
  // The restarted agent lets the copy go before launching (re-adopting) it:
  // the process must still be stopped, and its room wait until it is.
  ExecRunner after(options());
  EXPECT_TRUE(stopped(after, "alice/u2"));
  EXPECT_EQ(exit_of("u2"), "signaled 15");
  // A stop of someone else's key finds nothing of it.
  EXPECT_TRUE(after.stop("mallory/u2", 0s));
}

}  // namespace
}  // namespace shoal::cluster
