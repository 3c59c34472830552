// backend: slurm with real agents and a real Slurm (issue 20): a 4-node dev
// cluster from scripts/slurm-dev.sh behind the agent "east"; the source's
// own cluster is too small, so its work runs at east, as Slurm jobs. Needs
// root (slurmd runs jobs as their user); skipped without it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/cluster/slurm/slurm_rest.h"
#include "agent/cluster/slurm/slurm_runner.h"
#include "dev_slurm.h"
#include "harness.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace slurm = cluster::slurm;

class SlurmBackend : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    slurm_.up(4, 8);
    slurm_dir_ = slurm_.dir();
    socket_ = slurm_.socket();
    output_ = slurm_.output();
  }
  static void TearDownTestSuite() {
    std::string out;
    std::vector<std::string> left = slurm_.down(&out);
    EXPECT_TRUE(left.empty()) << left.size() << " processes of the dev Slurm left behind:\n" << out;
  }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the dev Slurm cluster needs root";
    ASSERT_FALSE(socket_.empty()) << "scripts/slurm-dev.sh up did not bring the cluster up";
    // Every test starts from an idle Slurm.
    ASSERT_TRUE(wait_until([&] { return unfinished_jobs().empty(); }, 30s));
    std::string tiny = dir_.path() + "/tiny.yaml";
    std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                           "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
    std::string east = dir_.path() + "/east.yaml";
    std::ofstream(east) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
                           "spec:\n  backend: slurm\n  slurm:\n    endpoint: unix://"
                        << socket_ << "\n    partition: dev\n    outputDir: " << output_
                        << "\n    completionLog: " << slurm_dir_ << "/log/jobcomp.txt\n"
                        << "    timeout: 500ms\n";
    source_.init({"--cluster-config", tiny});
    east_.init({"--cluster-config", east});
    for (AgentProcess* agent : {&source_, &east_}) {
      agent->set_config("heartbeatInterval", "300ms");
      agent->set_config("gcInterval", "1s");
      ASSERT_TRUE(agent->start()) << agent->name() << "\n" << agent->log();
    }
    CommandResult token = east_.ctl({"invite", "create", "--to", source_.identity(), "--namespace", "default"});
    ASSERT_EQ(token.exit_code, 0) << token.err;
    CommandResult accepted = source_.ctl({"invite", "accept", token.out.substr(0, token.out.find('\n'))});
    ASSERT_EQ(accepted.exit_code, 0) << accepted.err;
    ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "32"; }, 20s))
        << "east advertises Slurm's 4 x 8 cpus; got " << free_cpu_at_source();
  }

  void TearDown() override {
    source_.stop();
    east_.stop();
    // Cancel whatever a failed test left, so the next starts idle.
    slurm::SlurmRestClient client(options());
    for (const slurm::SlurmJob& job : unfinished_jobs()) (void)client.cancel(job.job_id);
  }

  static slurm::SlurmClientOptions options() {
    slurm::SlurmClientOptions options;
    options.endpoint.unix_socket = socket_;
    options.endpoint.base_url = "http://localhost";
    return options;
  }

  std::vector<slurm::SlurmJob> all_jobs() {
    slurm::SlurmRestClient client(options());
    auto jobs = client.jobs();
    return jobs.is_ok() ? *jobs : std::vector<slurm::SlurmJob>{};
  }
  std::vector<slurm::SlurmJob> unfinished_jobs() {
    std::vector<slurm::SlurmJob> out;
    for (slurm::SlurmJob& job : all_jobs()) {
      if (!job.finished()) out.push_back(std::move(job));
    }
    return out;
  }
  // Slurm's jobs tagged as east's copies of `uid`.
  std::vector<slurm::SlurmJob> jobs_of(const std::string& uid) {
    std::vector<slurm::SlurmJob> out;
    for (slurm::SlurmJob& job : all_jobs()) {
      auto tag = slurm::parse_tag(job.comment);
      if (tag && tag->cluster == "east" && tag->key.ends_with("/" + uid)) out.push_back(std::move(job));
    }
    return out;
  }

  // What east tells the source it has free in "default", as printed ("32").
  std::string free_cpu_at_source() {
    json peers = source_.ctl_json({"peers"});
    if (peers.is_null()) return "";
    for (const auto& peer : peers["items"]) {
      if (peer["cluster"] != "east") continue;
      json capacity = peer.value("capacity", json::object());
      if (capacity.contains("default")) return capacity["default"]["free"].value("cpu", "");
    }
    return "";
  }

  std::string submit(const std::string& name, const std::string& spec) {
    std::string path = dir_.path() + "/" + name + ".yaml";
    std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
                        << ", namespace: default}\nspec: {" << spec << "}\n";
    CommandResult result = source_.ctl({"submit", "-f", path});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    json described = describe(name);
    return described.is_null() ? "" : described["metadata"]["uid"].get<std::string>();
  }
  json describe(const std::string& name) {
    return source_.ctl_json({"describe", "workload", "default/" + name});
  }
  std::string phase(const std::string& name) {
    json described = describe(name);
    return described.is_null() ? "" : described["status"]["phase"].get<std::string>();
  }
  std::string status_reason(const std::string& name) {
    json described = describe(name);
    return described.is_null() ? "" : described["status"].value("reason", "");
  }

  TempDir dir_;
  AgentProcess source_{"source", dir_.path()};
  AgentProcess east_{"east", dir_.path()};
  static DevSlurm slurm_;
  static std::string slurm_dir_, socket_, output_;
};
DevSlurm SlurmBackend::slurm_;
std::string SlurmBackend::slurm_dir_, SlurmBackend::socket_, SlurmBackend::output_;

TEST_F(SlurmBackend, AWorkloadRunsAsOneTaggedSlurmJobItsOutputIsReadAtTheSourceAndExit3IsFailed3) {
  std::string uid = submit("hello", "resources: {cpu: \"2\", memory: 256Mi}, "
                                    "command: [sh, -c, 'echo hello from $SHOAL_CLUSTER; exit 3']");
  ASSERT_FALSE(uid.empty());
  ASSERT_TRUE(wait_until([&] { return phase("hello") == "Failed"; }, 30s)) << phase("hello");
  json described = describe("hello");
  EXPECT_EQ(described["status"]["cluster"], "east");
  EXPECT_EQ(described["status"]["exitCode"], 3) << described.dump();

  std::vector<slurm::SlurmJob> jobs = jobs_of(uid);
  ASSERT_EQ(jobs.size(), 1u) << "one Slurm job per copy";
  EXPECT_EQ(jobs[0].state, "FAILED");
  EXPECT_EQ(jobs[0].exit_code, 3);
  auto tag = slurm::parse_tag(jobs[0].comment);
  ASSERT_TRUE(tag);
  EXPECT_EQ(tag->epoch, described["status"]["epoch"].get<uint64_t>());

  CommandResult logs = source_.ctl({"logs", "default/hello"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "hello from east\n");
}

TEST_F(SlurmBackend, DeleteAtTheSourceCancelsTheSlurmJob) {
  std::string uid = submit("sleeper", "resources: {cpu: \"1\"}, command: [sleep, \"300\"]");
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = jobs_of(uid);
        return jobs.size() == 1 && jobs[0].state == "RUNNING";
      },
      30s));
  int64_t deleted_at = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  CommandResult deleted = source_.ctl({"delete", "workload", "default/sleeper"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = jobs_of(uid);
        return jobs.size() == 1 && jobs[0].state != "RUNNING";
      },
      10s));
  // Slurm's own clock: it ended the job within the 2 s (its times
  // are whole seconds, hence the one more).
  std::vector<slurm::SlurmJob> jobs = jobs_of(uid);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_LE(jobs[0].end_time - deleted_at, 3) << "ended at " << jobs[0].end_time;
  // CANCELLED in the end (a cancel that meets the step starting can wait
  // for slurmstepd's 20 s retry, COMPLETING until then).
  EXPECT_TRUE(wait_until([&] { return jobs_of(uid)[0].state == "CANCELLED"; }, 60s));
}

TEST_F(SlurmBackend, ATargetKilledAndRestartedReadoptsItsJobWhichFinishesOnce) {
  std::string uid = submit("survivor", "resources: {cpu: \"1\"}, "
                                       "command: [sh, -c, 'sleep 4; echo done']");
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = jobs_of(uid);
        return jobs.size() == 1 && jobs[0].state == "RUNNING" && phase("survivor") == "Running";
      },
      30s));
  east_.kill_hard();
  ASSERT_TRUE(east_.start()) << east_.log();
  ASSERT_TRUE(wait_until([&] { return phase("survivor") == "Succeeded"; }, 60s)) << phase("survivor");
  std::vector<slurm::SlurmJob> jobs = jobs_of(uid);
  ASSERT_EQ(jobs.size(), 1u) << "Slurm saw exactly one job for the copy";
  EXPECT_EQ(jobs[0].state, "COMPLETED");
  EXPECT_EQ(describe("survivor")["status"]["cluster"], "east");
  CommandResult logs = source_.ctl({"logs", "default/survivor"});
  EXPECT_EQ(logs.out, "done\n") << logs.err;
}

TEST_F(SlurmBackend, LocalUsersJobsShrinkTheAdvertisedRoomAndSourceWorkWaits) {
  // Local users, straight to Slurm: every cpu of every node.
  slurm::SlurmRestClient client(options());
  std::vector<int64_t> local;
  for (int n = 1; n <= 4; ++n) {
    slurm::SlurmJobRequest request;
    request.name = "local-user";
    request.partition = "dev";
    request.script = "#!/bin/sh\nsleep 300\n";
    request.working_directory = "/tmp";
    request.standard_output = "/dev/null";
    request.cpus_per_task = 8;
    request.memory_per_node_mib = 256;
    request.node_list = "n" + std::to_string(n);
    auto id = client.submit(request);
    ASSERT_TRUE(id.is_ok()) << id.status().message();
    local.push_back(*id);
  }
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = unfinished_jobs();
        return jobs.size() == 4 && std::all_of(jobs.begin(), jobs.end(), [](const auto& job) {
                 return job.state == "RUNNING";
               });
      },
      30s));
  // Within a heartbeat or two (300 ms here) of Slurm starting them.
  EXPECT_TRUE(wait_until([&] { return free_cpu_at_source() == "0"; }, 5s)) << free_cpu_at_source();

  std::string uid = submit("patient", "resources: {cpu: \"1\"}, command: [echo, ran]");
  ASSERT_FALSE(uid.empty());
  // It waits: nothing of it reaches Slurm while the room is taken.
  EXPECT_FALSE(wait_until([&] { return !jobs_of(uid).empty(); }, 2s));
  EXPECT_NE(phase("patient"), "Running");

  for (int64_t id : local) ASSERT_TRUE(client.cancel(id).is_ok());
  ASSERT_TRUE(wait_until([&] { return phase("patient") == "Succeeded"; }, 60s))
      << phase("patient") << " " << status_reason("patient");
  EXPECT_EQ(jobs_of(uid).size(), 1u);
}

TEST_F(SlurmBackend, AWorkloadBiggerThanAnySlurmNodeIsUnschedulableWithTheTargetsReason) {
  submit("huge", "resources: {cpu: \"16\"}, command: [echo, never]");
  ASSERT_TRUE(wait_until([&] { return status_reason("huge").find("east=") != std::string::npos; }, 20s))
      << describe("huge").dump();
  std::string message = status_reason("huge");
  EXPECT_NE(message.find("Unschedulable"), std::string::npos) << message;
  EXPECT_NE(message.find("east=NoNodeFits"), std::string::npos) << message;
  EXPECT_TRUE(unfinished_jobs().empty());
}

TEST_F(SlurmBackend, AStoppedSlurmrestdMakesTheAgentRefuseCandidatesAndItRecovers) {
  std::ifstream pid_file(slurm_dir_ + "/run/slurmrestd.pid");
  pid_t pid = 0;
  pid_file >> pid;
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  // East notices within a poll and its REST timeout (500 ms here), and says so.
  bool unhealthy = wait_until(
      [&] {
        json status = east_.ctl_json({"status"});
        return !status.is_null() && status["backend"]["healthy"] == false;
      },
      10s);
  if (!unhealthy) ::kill(pid, SIGCONT);
  ASSERT_TRUE(unhealthy) << east_.ctl({"status"}).out;
  EXPECT_NE(east_.ctl({"status"}).out.find("backend slurm UNAVAILABLE: slurmrestd"), std::string::npos);
  std::string uid = submit("patient", "resources: {cpu: \"1\"}, command: [echo, ran]");
  bool refused = wait_until(
      [&] { return status_reason("patient").find("BackendUnavailable") != std::string::npos; }, 20s);
  // The agent still serves its operator and its peers meanwhile.
  CommandResult status = east_.ctl({"status"});
  bool source_active = false;
  json peers = east_.ctl_json({"peers"});
  for (const auto& peer : peers["items"]) source_active = source_active || peer["state"] == "Active";
  ::kill(pid, SIGCONT);
  EXPECT_TRUE(refused) << status_reason("patient");
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(source_active) << peers.dump();
  // Back: the workload is placed again and runs.
  ASSERT_TRUE(wait_until([&] { return phase("patient") == "Succeeded"; }, 90s))
      << phase("patient") << " " << status_reason("patient");
  EXPECT_EQ(jobs_of(uid).size(), 1u);
}

}  // namespace
}  // namespace shoal::testing
