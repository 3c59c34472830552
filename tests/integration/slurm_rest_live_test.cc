// SlurmRestClient against a real Slurm: a 4-node dev cluster from
// scripts/slurm-dev.sh, its slurmrestd on a unix socket. Needs root (slurmd
// runs jobs as their user); skipped without it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

#include "agent/cluster/slurm/slurm_rest.h"
#include "dev_slurm.h"

namespace shoal::cluster::slurm {
namespace {

using namespace std::chrono_literals;

template <typename Condition>
bool wait_until(Condition condition, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return condition();
}

class SlurmLive : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::dev_slurm_unavailable().empty()) return;
    slurm_.up(4, 8);
    dir_ = slurm_.dir();
    socket_ = slurm_.socket();
    output_ = slurm_.output();
  }
  static void TearDownTestSuite() {
    std::vector<std::string> left = slurm_.down();
    EXPECT_TRUE(left.empty()) << left.size() << " processes of the dev Slurm left behind";
  }
  void SetUp() override {
    SHOAL_NEED_DEV_SLURM();
    ASSERT_FALSE(socket_.empty()) << "scripts/slurm-dev.sh up did not bring the cluster up";
  }

  SlurmClientOptions options(std::chrono::milliseconds timeout = 2000ms) const {
    SlurmClientOptions options;
    options.endpoint.unix_socket = socket_;
    options.endpoint.base_url = "http://localhost";
    options.timeout = timeout;
    return options;
  }
  SlurmJobRequest request(const std::string& name, const std::string& body) const {
    SlurmJobRequest request;
    request.name = name;
    request.comment = "shoal uid=" + name + " epoch=1 copy=0";
    request.partition = "dev";
    request.script = "#!/bin/sh\n" + body + "\n";
    request.working_directory = "/tmp";
    request.standard_output = output_ + "/" + name + ".log";
    request.cpus_per_task = 2;
    request.memory_per_node_mib = 256;
    return request;
  }

  static shoal::testing::DevSlurm slurm_;
  static std::string dir_, socket_, output_;
};
shoal::testing::DevSlurm SlurmLive::slurm_;
std::string SlurmLive::dir_, SlurmLive::socket_, SlurmLive::output_;

TEST_F(SlurmLive, NodesAreReadAndAJobsExitCodeAndTagComeBack) {
  SlurmRestClient client(options());
  ASSERT_TRUE(client.ping().is_ok());
  auto nodes = client.nodes();
  ASSERT_TRUE(nodes.is_ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 4u);
  for (const SlurmNode& node : *nodes) {
    EXPECT_EQ(node.cpus, 8) << node.name;
    EXPECT_TRUE(node.usable()) << node.name << " " << node.state;
  }

  auto id = client.submit(request("exit3", "echo ran; exit 3"));
  ASSERT_TRUE(id.is_ok()) << id.status().message();
  SlurmJob seen;
  ASSERT_TRUE(wait_until(
      [&] {
        auto job = client.job(*id);
        if (job.is_ok()) seen = *job;
        return job.is_ok() && job->finished();
      },
      30s))
      << seen.state;
  EXPECT_EQ(seen.state, "FAILED");
  EXPECT_EQ(seen.exit_code, 3);
  EXPECT_EQ(seen.comment, "shoal uid=exit3 epoch=1 copy=0");
  std::ifstream log(output_ + "/exit3.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(text.str(), "ran\n");

  // Its completion line is kept for when Slurm forgets the job.
  std::ifstream jobcomp(dir_ + "/log/jobcomp.txt");
  std::string line;
  bool found = false;
  while (std::getline(jobcomp, line)) {
    auto record = parse_jobcomp_line(line);
    if (record && record->job_id == *id) {
      found = true;
      EXPECT_EQ(record->state, "FAILED");
      EXPECT_EQ(record->exit_code, 3);
    }
  }
  EXPECT_TRUE(found) << "no jobcomp line for job " << *id;
  EXPECT_EQ(client.job(999999).status().code(), ErrorCode::kNotFound);
}

TEST_F(SlurmLive, ARunningJobIsCancelledAndChangesAreReadIncrementally) {
  SlurmRestClient client(options());
  int64_t before = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count() -
                   1;
  auto id = client.submit(request("sleeper", "sleep 300"));
  ASSERT_TRUE(id.is_ok()) << id.status().message();
  ASSERT_TRUE(wait_until(
      [&] {
        auto job = client.job(*id);
        return job.is_ok() && job->state == "RUNNING";
      },
      30s));
  auto changed = client.jobs(before);
  ASSERT_TRUE(changed.is_ok()) << changed.status().message();
  bool listed = false;
  for (const SlurmJob& job : *changed) listed = listed || job.job_id == *id;
  EXPECT_TRUE(listed) << "a job changed since " << before << " is in the incremental listing";
  // Nothing changed since a time to come: slurmrestd says 304, which is no
  // job, not an error.
  auto unchanged = client.jobs(before + 3600);
  ASSERT_TRUE(unchanged.is_ok()) << unchanged.status().message();
  EXPECT_TRUE(unchanged->empty());

  ASSERT_TRUE(client.cancel(*id).is_ok());
  std::string last_seen;
  auto state_is = [&](std::initializer_list<std::string_view> states) {
    auto job = client.job(*id);
    last_seen = job.is_ok() ? job->state : job.status().message();
    if (!job.is_ok()) return false;
    for (std::string_view state : states) {
      if (job->state == state) return true;
    }
    return false;
  };
  // The cancel takes hold: the job leaves RUNNING.
  ASSERT_TRUE(wait_until([&] { return state_is({"COMPLETING", "CANCELLED"}); }, 30s))
      << "job " << *id << " last seen as " << last_seen;
  // It ends CANCELLED, but not always within seconds: a cancel that meets the
  // batch step still starting (seen on a loaded machine) leaves slurmstepd's
  // completion RPC to its 20 s retry, COMPLETING until then.
  ASSERT_TRUE(wait_until([&] { return state_is({"CANCELLED"}); }, 60s))
      << "job " << *id << " last seen as " << last_seen;
}

TEST_F(SlurmLive, ASilentSlurmrestdIsUnavailableWithinTheTimeoutNotAHang) {
  // slurmrestd stopped (SIGSTOP) accepts the connection and never answers.
  std::ifstream pid_file(dir_ + "/run/slurmrestd.pid");
  pid_t pid = 0;
  pid_file >> pid;
  ASSERT_GT(pid, 0);
  // The pid is env's, which exec'd slurmrestd: the same process.
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  SlurmRestClient client(options(300ms));
  // Without its timeout the call would wait for ever; its answering at all
  // while slurmrestd is stopped is the check, and the wait only ends a hang
  // (two hundred times the timeout) as a failure instead of ctest's timeout.
  auto pinged = std::async(std::launch::async, [&] { return client.ping(); });
  bool answered = pinged.wait_for(60s) == std::future_status::ready;
  kill(pid, SIGCONT);
  ASSERT_TRUE(answered) << "the call is not bounded by its timeout";
  Status ping = pinged.get();
  EXPECT_EQ(ping.code(), ErrorCode::kUnavailable) << ping.message();
  EXPECT_NE(ping.message().find("slurmrestd"), std::string::npos) << ping.message();
  ASSERT_TRUE(wait_until([&] { return client.ping().is_ok(); }, 10s)) << "recovers once it answers";

  SlurmClientOptions nowhere = options();
  nowhere.endpoint.unix_socket = dir_ + "/run/no-such.sock";
  EXPECT_EQ(SlurmRestClient(nowhere).ping().code(), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace shoal::cluster::slurm
