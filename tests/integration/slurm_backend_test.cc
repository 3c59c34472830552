// backend: slurm with real agents and a real Slurm: a 4-node dev
// cluster from scripts/slurm-dev.sh behind the agent "east"; the source's
// own cluster is too small, so its work runs at east, as Slurm jobs. Needs
// root (slurmd runs jobs as their user); skipped without it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
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

// One dev Slurm for every suite of this binary: up before the first test,
// down (and checked to leave nothing) after the last.
DevSlurm& dev_slurm() {
  static DevSlurm slurm;
  return slurm;
}
class DevSlurmEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (dev_slurm_unavailable().empty()) dev_slurm().up(4, 8);
  }
  void TearDown() override {
    std::string out;
    std::vector<std::string> left = dev_slurm().down(&out);
    EXPECT_TRUE(left.empty()) << left.size() << " processes of the dev Slurm left behind:\n" << out;
  }
};
const auto* const kDevSlurm = ::testing::AddGlobalTestEnvironment(new DevSlurmEnvironment);

// What both suites need: the dev Slurm up and idle, and a REST client to it.
class DevSlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SHOAL_NEED_DEV_SLURM();
    ASSERT_FALSE(socket().empty()) << "scripts/slurm-dev.sh up did not bring the cluster up";
    // Every test starts from an idle Slurm.
    ASSERT_TRUE(wait_until([&] { return unfinished_jobs().empty(); }, 30s));
  }
  void TearDown() override {
    // Cancel whatever a failed test left, so the next starts idle.
    slurm::SlurmRestClient client(options());
    for (const slurm::SlurmJob& job : unfinished_jobs()) (void)client.cancel(job.job_id);
  }

  static const std::string& socket() { return dev_slurm().socket(); }
  static slurm::SlurmClientOptions options() {
    slurm::SlurmClientOptions options;
    options.endpoint.unix_socket = socket();
    options.endpoint.base_url = "http://localhost";
    return options;
  }
  // Every job Slurm knows. slurmrestd may fail an answer under load (a
  // sanitizer build beside the tests): asked again for up to 5 s, then none.
  std::vector<slurm::SlurmJob> all_jobs() {
    slurm::SlurmRestClient client(options());
    Result<std::vector<slurm::SlurmJob>> jobs = internal_error("not asked yet");
    wait_until([&] { return (jobs = client.jobs()).is_ok(); }, std::chrono::seconds(5));
    return jobs.is_ok() ? *jobs : std::vector<slurm::SlurmJob>{};
  }
  std::vector<slurm::SlurmJob> unfinished_jobs() {
    std::vector<slurm::SlurmJob> out;
    for (slurm::SlurmJob& job : all_jobs()) {
      if (!job.finished()) out.push_back(std::move(job));
    }
    return out;
  }
  // A local user's job, straight to Slurm: `cpus` cpus (on `node`, if named) for 300 s.
  static slurm::SlurmJobRequest local_job(int64_t cpus, const std::string& node = "") {
    slurm::SlurmJobRequest request;
    request.name = "local-user";
    request.partition = "dev";
    request.script = "#!/bin/sh\nsleep 300\n";
    request.working_directory = "/tmp";
    request.standard_output = "/dev/null";
    request.cpus_per_task = cpus;
    request.memory_per_node_mib = 256;
    request.node_list = node;
    return request;
  }
  // Slurm's jobs tagged as `cluster`'s copies of a key ending in `key_end`.
  std::vector<slurm::SlurmJob> jobs_of(const std::string& key_end, const std::string& cluster = "east") {
    std::vector<slurm::SlurmJob> out;
    for (slurm::SlurmJob& job : all_jobs()) {
      auto tag = slurm::parse_tag(job.comment);
      if (tag && tag->cluster == cluster && tag->key.ends_with(key_end)) out.push_back(std::move(job));
    }
    return out;
  }
  // The first of them; a job with nothing set when there is none (or
  // slurmrestd did not answer this once: all_jobs() is then empty).
  slurm::SlurmJob first_job_of(const std::string& key_end, const std::string& cluster = "east") {
    std::vector<slurm::SlurmJob> jobs = jobs_of(key_end, cluster);
    return jobs.empty() ? slurm::SlurmJob{} : std::move(jobs.front());
  }

  TempDir dir_;
};

class SlurmBackend : public DevSlurmTest {
 protected:
  // Whether east's cluster manifest leaves spec.slurm.outputDir out.
  virtual bool default_output_dir() const { return false; }

  void SetUp() override {
    DevSlurmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::string tiny = dir_.path() + "/tiny.yaml";
    std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                           "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
    std::string east = dir_.path() + "/east.yaml";
    std::ofstream(east) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: east}\n"
                           "spec:\n  backend: slurm\n  slurm:\n    endpoint: unix://"
                        << socket() << "\n    partition: dev\n"
                        << (default_output_dir() ? "" : "    outputDir: " + dev_slurm().output() + "\n")
                        << "    completionLog: " << dev_slurm().dir() << "/log/jobcomp.txt\n"
                        << "    timeout: 500ms\n";
    source_.init({"--cluster-config", tiny});
    east_.init({"--cluster-config", east});
    for (AgentProcess* agent : {&source_, &east_}) {
      agent->set_config("heartbeatInterval", "300ms");
      agent->set_config("gcInterval", "1s");
      ASSERT_TRUE(agent->start()) << agent->name() << "\n" << agent->log();
    }
    ASSERT_EQ(invite(east_, source_), "");
    ASSERT_TRUE(wait_until([&] { return free_cpu_at_source() == "32"; }, 20s))
        << "east advertises Slurm's 4 x 8 cpus; got " << free_cpu_at_source();
  }

  void TearDown() override {
    source_.stop();
    east_.stop();
    DevSlurmTest::TearDown();
  }

  // What east tells the source it has free in "default", as printed ("32").
  std::string free_cpu_at_source() { return advertised_free_cpu(source_, "east"); }


  // What the source reads as east's count of work in queue "default" (-1: none yet).
  int64_t queue_count_at_source() {
    json clusters = source_.ctl_json({"get", "clusters"});
    if (clusters.is_null()) return -1;
    for (const auto& c : clusters["items"]) {
      if (c["cluster"] == "east") return c["counts"]["queues"].value("default", int64_t{0});
    }
    return -1;
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

  AgentProcess source_{"source", dir_.path()};
  AgentProcess east_{"east", dir_.path()};
};

TEST_F(SlurmBackend, AWorkloadRunsAsOneTaggedSlurmJobItsOutputIsReadAtTheSourceAndExit3IsFailed3) {
  std::string uid = submit("hello", "resources: {cpu: \"2\", memory: 256Mi}, "
                                    "command: [sh, -c, 'echo hello from $SHOAL_CLUSTER; exit 3']");
  ASSERT_FALSE(uid.empty());
  ASSERT_TRUE(wait_until([&] { return phase("hello") == "Failed"; }, 30s)) << phase("hello");
  json described = describe("hello");
  EXPECT_EQ(described["status"]["cluster"], "east");
  EXPECT_EQ(described["status"]["exitCode"], 3) << described.dump();

  std::vector<slurm::SlurmJob> jobs = jobs_of("/" + uid);
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

// east's manifest leaves outputDir out, and east runs as root with its
// private data directory, while the jobs run as slurmrestd's user.
class SlurmBackendDefaults : public SlurmBackend {
 protected:
  bool default_output_dir() const override { return true; }
  void TearDown() override {
    SlurmBackend::TearDown();
    std::filesystem::remove_all("/var/tmp/shoal-east-slurm-output");
  }
};

TEST_F(SlurmBackendDefaults, WithoutOutputDirAJobRunsAndItsOutputAndExitCodeReachTheSource) {
  std::string uid = submit("plain", "resources: {cpu: \"1\", memory: 128Mi}, "
                                    "command: [sh, -c, 'echo plain at $SHOAL_CLUSTER; exit 4']");
  ASSERT_FALSE(uid.empty());
  ASSERT_TRUE(wait_until([&] { return phase("plain") == "Failed"; }, 30s)) << phase("plain");
  json described = describe("plain");
  EXPECT_EQ(described["status"]["exitCode"], 4) << described.dump();
  CommandResult logs = source_.ctl({"logs", "default/plain"});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, "plain at east\n");
}

TEST_F(SlurmBackend, DeleteAtTheSourceCancelsTheSlurmJob) {
  std::string uid = submit("sleeper", "resources: {cpu: \"1\"}, command: [sleep, \"300\"]");
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = jobs_of("/" + uid);
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
        auto jobs = jobs_of("/" + uid);
        return jobs.size() == 1 && jobs[0].state != "RUNNING";
      },
      10s));
  // Slurm's own clock: it ended the job within the 2 s (its times
  // are whole seconds, hence the one more).
  std::vector<slurm::SlurmJob> jobs = jobs_of("/" + uid);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_LE(jobs[0].end_time - deleted_at, 3) << "ended at " << jobs[0].end_time;
  // CANCELLED in the end (a cancel that meets the step starting can wait
  // for slurmstepd's 20 s retry, COMPLETING until then).
  EXPECT_TRUE(wait_until([&] { return first_job_of("/" + uid).state == "CANCELLED"; }, 60s));
}

TEST_F(SlurmBackend, ATargetKilledAndRestartedReadoptsItsJobWhichFinishesOnce) {
  std::string uid = submit("survivor", "resources: {cpu: \"1\"}, "
                                       "command: [sh, -c, 'sleep 4; echo done']");
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = jobs_of("/" + uid);
        return jobs.size() == 1 && jobs[0].state == "RUNNING" && phase("survivor") == "Running";
      },
      30s));
  east_.kill_hard();
  ASSERT_TRUE(east_.start()) << east_.log();
  ASSERT_TRUE(wait_until([&] { return phase("survivor") == "Succeeded"; }, 60s)) << phase("survivor");
  std::vector<slurm::SlurmJob> jobs = jobs_of("/" + uid);
  ASSERT_EQ(jobs.size(), 1u) << "Slurm saw exactly one job for the copy";
  EXPECT_EQ(jobs[0].state, "COMPLETED");
  EXPECT_EQ(describe("survivor")["status"]["cluster"], "east");
  CommandResult logs = source_.ctl({"logs", "default/survivor"});
  EXPECT_EQ(logs.out, "done\n") << logs.err;
}

// A node that fails under a job is not the job's failure: under the
// default restartPolicy Never the source places it again, not at east
// (which just lost it), and it succeeds at west.
TEST_F(SlurmBackend, AJobWhoseNodeFailsIsPlacedAgainElsewhereAndSucceeds) {
  std::string uid = submit("steady", "resources: {cpu: \"1\"}, duration: 2s, "
                                     "command: [sh, -c, 'sleep 300']");
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = jobs_of("/" + uid);
        return jobs.size() == 1 && jobs[0].state == "RUNNING" && phase("steady") == "Running";
      },
      30s));
  std::string node = first_job_of("/" + uid).nodes;
  // west (the sim backend: the workload's duration, 2 s) only now, so the
  // first placement was east's.
  std::string plain = dir_.path() + "/west.yaml";
  std::ofstream(plain) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: west}\n"
                          "spec:\n  nodes:\n  - {name: w, count: 1, capacity: {cpu: \"4\", memory: 8Gi}}\n";
  AgentProcess west{"west", dir_.path()};
  west.init({"--cluster-config", plain});
  west.set_config("heartbeatInterval", "300ms");
  ASSERT_TRUE(west.start()) << west.log();
  ASSERT_EQ(invite(west, source_), "");

  std::string scontrol = "SLURM_CONF=" + dev_slurm().dir() + "/etc/slurm.conf scontrol update NodeName=" + node;
  run_shell(scontrol + " State=DOWN Reason=shoal-test 2>&1");
  struct Resume {
    std::string command;
    ~Resume() { run_shell(command + " State=RESUME 2>&1"); }
  } resume{scontrol};
  ASSERT_TRUE(wait_until([&] {
    auto jobs = jobs_of("/" + uid);
    return jobs.size() == 1 && jobs[0].state == "NODE_FAIL";
  }, 30s)) << "Slurm ended the job NODE_FAIL";
  ASSERT_TRUE(wait_until([&] { return phase("steady") == "Succeeded"; }, 60s)) << describe("steady").dump(2);
  json described = describe("steady");
  EXPECT_EQ(described["status"]["cluster"], "west");
  EXPECT_EQ(described["status"]["disruptions"], 1);
  EXPECT_EQ(described["status"]["restarts"], 0);
  bool told = false;
  for (const auto& event : described["events"]) {
    told |= event["text"].get<std::string>().find("NodeFailed at east") != std::string::npos;
  }
  EXPECT_TRUE(told) << described["events"].dump(2);
  west.stop();
}

// startTimeout: Slurm keeps the job pending (its partition is down), so
// east gives the copy up once the timeout has passed: it cancels the job,
// and the source places the work again elsewhere, where it runs. Slurm
// ended the first job before the second copy started.
TEST_F(SlurmBackend, AJobItsPartitionKeepsPendingIsCancelledAfterStartTimeoutAndRunsElsewhere) {
  std::string scontrol = "SLURM_CONF=" + dev_slurm().dir() + "/etc/slurm.conf scontrol update PartitionName=dev";
  run_shell(scontrol + " State=DOWN 2>&1");
  ShellAtExit up(scontrol + " State=UP 2>&1");
  std::string uid = submit("held", "resources: {cpu: \"1\"}, duration: 2s, startTimeout: 4s, "
                                   "command: [sh, -c, 'sleep 1']");
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = jobs_of("/" + uid);
        return jobs.size() == 1 && jobs[0].state == "PENDING" && phase("held") == "Bound";
      },
      30s)) << describe("held").dump(2);
  // west (the sim backend: the workload's duration, 2 s) only now, so the
  // first placement was east's.
  std::string plain = dir_.path() + "/west.yaml";
  std::ofstream(plain) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: west}\n"
                          "spec:\n  nodes:\n  - {name: w, count: 1, capacity: {cpu: \"4\", memory: 8Gi}}\n";
  AgentProcess west{"west", dir_.path()};
  west.init({"--cluster-config", plain});
  west.set_config("heartbeatInterval", "300ms");
  ASSERT_TRUE(west.start()) << west.log();
  ASSERT_EQ(invite(west, source_), "");

  ASSERT_TRUE(wait_until([&] { return phase("held") == "Succeeded"; }, 60s)) << describe("held").dump(2);
  json described = describe("held");
  EXPECT_EQ(described["status"]["cluster"], "west");
  EXPECT_EQ(described["status"]["disruptions"], 1);
  EXPECT_EQ(described["status"]["restarts"], 0);
  bool told = false, why = false;
  for (const auto& event : described["events"]) {
    told |= event["text"].get<std::string>().find("StartTimeout at east") != std::string::npos;
    why |= event["text"].get<std::string>().find("pending: PartitionDown") != std::string::npos;
  }
  EXPECT_TRUE(told) << described["events"].dump(2);
  EXPECT_TRUE(why) << "Slurm's reason for keeping it pending is not shown:\n" << described["events"].dump(2);
  std::vector<slurm::SlurmJob> jobs = jobs_of("/" + uid);
  ASSERT_EQ(jobs.size(), 1u) << "one job at Slurm, cancelled while pending";
  EXPECT_EQ(jobs[0].state, "CANCELLED");
  ASSERT_GT(jobs[0].end_time, 0);
  // Both in the same ISO form, which orders as time does.
  EXPECT_LE(format_time(from_millis(jobs[0].end_time * 1000)), described["status"]["startedAt"].get<std::string>())
      << "Slurm ended the pending job before west started the work";
  west.stop();
}

TEST_F(SlurmBackend, LocalUsersJobsShrinkTheAdvertisedRoomAndSourceWorkWaits) {
  // Local users, straight to Slurm: every cpu of every node.
  slurm::SlurmRestClient client(options());
  std::vector<int64_t> local;
  for (int n = 1; n <= 4; ++n) {
    auto id = client.submit(local_job(8, "n" + std::to_string(n)));
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
  EXPECT_TRUE(wait_until([&] { return free_cpu_at_source() == "0"; }, 30s)) << free_cpu_at_source();
  // One more local job waits in Slurm's queue: weighted routing's `queue`
  // metric at the source counts it.
  auto waiting_id = client.submit(local_job(1));
  ASSERT_TRUE(waiting_id.is_ok()) << waiting_id.status().message();
  local.push_back(*waiting_id);
  EXPECT_TRUE(wait_until([&] { return queue_count_at_source() == 1; }, 30s)) << queue_count_at_source();
  EXPECT_EQ(east_.ctl_json({"status"})["backend"]["backlog"], 1);
  EXPECT_NE(east_.ctl({"status"}).out.find("backend slurm backlog: 1 pending job(s) of others"), std::string::npos);

  std::string uid = submit("patient", "resources: {cpu: \"1\"}, command: [echo, ran]");
  ASSERT_FALSE(uid.empty());
  // It waits: nothing of it reaches Slurm while the room is taken.
  EXPECT_FALSE(wait_until([&] { return !jobs_of("/" + uid).empty(); }, 2s));
  EXPECT_NE(phase("patient"), "Running");

  for (int64_t id : local) ASSERT_TRUE(client.cancel(id).is_ok());
  ASSERT_TRUE(wait_until([&] { return phase("patient") == "Succeeded"; }, 60s))
      << phase("patient") << " " << status_reason("patient");
  EXPECT_EQ(jobs_of("/" + uid).size(), 1u);
}

// Replicas are a gang: one Slurm job of a task per replica, each on the
// node the local scheduler reserved for it, each with its own output.
TEST_F(SlurmBackend, AGangRunsAsOneSlurmJobOfATaskPerReplicaOnTheReservedNodes) {
  std::string uid = submit("gang",
                           "replicas: 3, resources: {cpu: \"4\", memory: 256Mi}, "
                           "command: [sh, -c, 'echo replica $SHOAL_REPLICA on $SHOAL_NODE; sleep 1']");
  ASSERT_FALSE(uid.empty());
  // While it runs, Slurm's allocation on every node is exactly what east
  // holds for it: nothing shows up as others' room.
  ASSERT_TRUE(wait_until([&] { return phase("gang") == "Running"; }, 30s)) << phase("gang");
  json status = east_.ctl_json({"status"});
  for (const auto& node : status["nodes"]) {
    EXPECT_EQ(node["takenByOthers"]["cpu"], "0") << node.dump();
  }
  ASSERT_TRUE(wait_until([&] { return phase("gang") == "Succeeded"; }, 30s))
      << phase("gang") << " " << status_reason("gang");
  std::vector<slurm::SlurmJob> jobs = jobs_of("/" + uid);
  ASSERT_EQ(jobs.size(), 1u) << "one Slurm job for the gang";
  EXPECT_EQ(jobs[0].state, "COMPLETED");
  std::set<std::string> nodes;
  for (int replica = 0; replica < 3; ++replica) {
    CommandResult logs = source_.ctl({"logs", "default/gang", "--replica", std::to_string(replica)});
    ASSERT_EQ(logs.exit_code, 0) << logs.err;
    std::string prefix = "replica " + std::to_string(replica) + " on n";
    ASSERT_EQ(logs.out.rfind(prefix, 0), 0u) << logs.out;
    nodes.insert(logs.out.substr(prefix.size() - 1));
  }
  EXPECT_EQ(nodes.size(), 3u) << "three 4-cpu replicas on 8-cpu nodes left idle: one per node";
}

// A replica that fails ends its gang, and the gang is Failed with its code.
TEST_F(SlurmBackend, AGangWhoseReplicaFailsIsFailedWithItsExitCode) {
  submit("broken", "replicas: 2, resources: {cpu: \"1\"}, "
                   "command: [sh, -c, 'if [ $SHOAL_REPLICA = 1 ]; then exit 4; fi; sleep 300']");
  ASSERT_TRUE(wait_until([&] { return phase("broken") == "Failed"; }, 30s)) << phase("broken");
  EXPECT_EQ(describe("broken")["status"]["exitCode"], 4) << describe("broken").dump();
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
  std::ifstream pid_file(dev_slurm().dir() + "/run/slurmrestd.pid");
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
  EXPECT_EQ(jobs_of("/" + uid).size(), 1u);
}

// SlurmRunner alone against the dev Slurm: what the agents above cannot
// arrange on demand (a key relaunched while its old job stops, forged tags).
class SlurmRunnerLive : public DevSlurmTest {
 protected:
  void TearDown() override {
    runner_.reset();
    DevSlurmTest::TearDown();
  }

  std::unique_ptr<slurm::SlurmRunner> make_runner(const DevSlurm& slurm = dev_slurm()) {
    slurm::SlurmRunnerOptions options;
    options.spec.endpoint = "unix://" + slurm.socket();
    options.spec.partition = "dev";
    options.spec.completion_log = slurm.dir() + "/log/jobcomp.txt";
    options.client = this->options();
    options.client.endpoint.unix_socket = slurm.socket();
    options.cluster_name = "unit";
    options.state_dir = dir_.path() + "/state";
    options.output_dir = dev_slurm().output();
    options.poll_interval = 100ms;
    auto runner = slurm::SlurmRunner::create(std::move(options));
    EXPECT_TRUE(runner.is_ok()) << runner.status().message();
    return runner.is_ok() ? std::move(*runner) : nullptr;
  }
  static cluster::LaunchRequest nap(const std::string& key, uint64_t epoch, const std::string& node) {
    cluster::LaunchRequest request;
    request.key = key;
    request.uid = key.substr(key.find('/') + 1);
    request.epoch = epoch;
    request.source_cluster = "src";
    request.spec.name = "nap";
    request.spec.namespace_name = "default";
    request.spec.command = {"sh", "-c", "echo up; exec sleep 300"};
    request.spec.resources = {1000, 64 << 20, 0};
    request.nodes = {node};
    return request;
  }
  // Whether (key, epoch)'s job has started its command. A cancel that meets
  // a batch step still starting leaves the job COMPLETING for Slurm's 20 s
  // retry; waiting for this first keeps the tests off that race.
  bool started(const std::string& key, uint64_t epoch) {
    std::ifstream in(runner_->output_path(key, epoch));
    std::string line;
    return std::getline(in, line) && line == "up" && running(key, epoch).has_value();
  }
  // The job Slurm runs for (key, epoch), once it runs.
  std::optional<slurm::SlurmJob> running(const std::string& key, uint64_t epoch) {
    for (slurm::SlurmJob& job : jobs_of(key, "unit")) {
      auto tag = slurm::parse_tag(job.comment);
      if (tag->key == key && tag->epoch == epoch && job.state == "RUNNING") return std::move(job);
    }
    return std::nullopt;
  }
  // Observes until an event of `kind` for `key` arrives (true) or `limit` passes.
  bool observe_until(const std::string& key, cluster::WorkloadEventKind kind,
                     std::chrono::milliseconds limit, std::vector<cluster::WorkloadEvent>* seen = nullptr) {
    return wait_until(
        [&] {
          bool found = false;
          for (cluster::WorkloadEvent& event : runner_->observe(now())) {
            found = found || (event.key == key && event.kind == kind);
            if (seen) seen->push_back(std::move(event));
          }
          return found;
        },
        limit);
  }
  static TimePoint now() {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  }

  std::unique_ptr<slurm::SlurmRunner> runner_;
};

// A stopped copy's room is free once its own job ended, though the key was
// launched again (a new epoch) meanwhile and that job still runs.
TEST_F(SlurmRunnerLive, AStoppedCopyIsGoneWhenItsOwnJobEndsThoughItsKeyRunsAgain) {
  runner_ = make_runner();
  ASSERT_NE(runner_, nullptr);
  const std::string key = "src/again";
  ASSERT_TRUE(runner_->launch(nap(key, 1, "n1")).is_ok());
  ASSERT_TRUE(wait_until([&] { return started(key, 1); }, 20s));
  EXPECT_FALSE(runner_->stop(key, 1s));  // its job still runs: a kStopped follows
  ASSERT_TRUE(runner_->launch(nap(key, 2, "n2")).is_ok());
  ASSERT_TRUE(wait_until([&] { return started(key, 2); }, 20s));
  std::vector<cluster::WorkloadEvent> seen;
  ASSERT_TRUE(observe_until(key, cluster::WorkloadEventKind::kStopped, 60s, &seen))
      << "the stopped copy was not reported gone while its relaunch runs";
  for (const cluster::WorkloadEvent& event : seen) {
    EXPECT_TRUE(event.key != key || event.kind == cluster::WorkloadEventKind::kStopped ||
                event.kind == cluster::WorkloadEventKind::kStarted)
        << "the relaunch ended: " << event.message;
  }
  EXPECT_TRUE(running(key, 2).has_value()) << "the relaunch was cancelled with its predecessor";
  for (const slurm::SlurmJob& job : jobs_of(key, "unit")) {
    if (slurm::parse_tag(job.comment)->epoch == 1) {
      EXPECT_EQ(job.state, "CANCELLED");
    }
  }
  EXPECT_FALSE(runner_->stop(key, 1s));
  EXPECT_TRUE(observe_until(key, cluster::WorkloadEventKind::kStopped, 60s));
  EXPECT_TRUE(unfinished_jobs().empty());
}

// After a restart, a copy restored and never launched again is stopped by
// cancelling what the agent submitted before; one it never submitted has
// nothing running and is free at once.
TEST_F(SlurmRunnerLive, ARestartedRunnerStopsWhatItSubmittedBeforeAndNothingElse) {
  const std::string key = "src/before";
  runner_ = make_runner();
  ASSERT_NE(runner_, nullptr);
  ASSERT_TRUE(runner_->launch(nap(key, 3, "n1")).is_ok());
  ASSERT_TRUE(wait_until([&] { return started(key, 3); }, 20s));
  runner_ = make_runner();  // a restart: the job runs on
  ASSERT_NE(runner_, nullptr);
  EXPECT_TRUE(runner_->stop("src/never", 1s));
  EXPECT_FALSE(runner_->stop(key, 1s));
  ASSERT_TRUE(observe_until(key, cluster::WorkloadEventKind::kStopped, 60s))
      << first_job_of(key, "unit").state;
  std::vector<slurm::SlurmJob> jobs = jobs_of(key, "unit");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].state, "CANCELLED");
}

// Anyone may write a comment: a job with this agent's tag that runs as
// another user is not its job, and does not end its copy.
TEST_F(SlurmRunnerLive, AJobWithOurTagRunAsAnotherUserIsNotOurs) {
  const std::string key = "src/forged";
  runner_ = make_runner();
  ASSERT_NE(runner_, nullptr);
  ASSERT_TRUE(runner_->launch(nap(key, 1, "n1")).is_ok());
  ASSERT_TRUE(wait_until([&] { return started(key, 1); }, 20s));
  // The runner has listed its own job once, and so knows whom its jobs run as.
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir_.path() + "/state/user"); }, 10s));
  std::string forged = run_shell("SLURM_CONF=" + dev_slurm().dir() +
                                 "/etc/slurm.conf runuser -u nobody -- sbatch --parsable -p dev "
                                 "--comment='" + slurm::format_tag({"unit", key, 1}) +
                                 "' -o /dev/null --wrap true 2>&1");
  ASSERT_FALSE(forged.empty());
  ASSERT_TRUE(wait_until(
      [&] {
        for (const slurm::SlurmJob& job : jobs_of(key, "unit")) {
          if (job.user_name == "nobody" && job.state == "COMPLETED") return true;
        }
        return false;
      },
      20s))
      << forged;
  std::vector<cluster::WorkloadEvent> seen;
  EXPECT_FALSE(observe_until(key, cluster::WorkloadEventKind::kSucceeded, 2s, &seen));
  for (const cluster::WorkloadEvent& event : seen) {
    EXPECT_TRUE(event.key != key || event.kind == cluster::WorkloadEventKind::kStarted)
        << "the forged job ended the copy: " << event.message;
  }
  EXPECT_TRUE(running(key, 1).has_value());
}

// A copy is Started when Slurm starts its job, not when it is submitted:
// one Slurm holds PENDING (a local user's job took the node first) is not
// running yet. The local user's pending jobs are the runner's backlog;
// its own are not.
TEST_F(SlurmRunnerLive, ACopyStartsWhenSlurmStartsItsJobNotWhenItIsSubmitted) {
  const std::string key = "src/late";
  runner_ = make_runner();
  ASSERT_NE(runner_, nullptr);
  auto local = [&](const std::string& node) {
    return run_shell("SLURM_CONF=" + dev_slurm().dir() +
                     "/etc/slurm.conf runuser -u nobody -- sbatch --parsable -p dev -w " + node +
                     " -c 8 -o /dev/null --wrap 'sleep 300' 2>&1");
  };
  std::string taker = local("n1");
  ASSERT_TRUE(wait_until([&] { return unfinished_jobs().size() == 1 && unfinished_jobs()[0].state == "RUNNING"; }, 20s))
      << taker;
  ASSERT_TRUE(runner_->launch(nap(key, 1, "n1")).is_ok());
  ASSERT_TRUE(wait_until([&] { return !jobs_of(key, "unit").empty(); }, 20s));
  EXPECT_EQ(first_job_of(key, "unit").state, "PENDING");
  EXPECT_FALSE(observe_until(key, cluster::WorkloadEventKind::kStarted, 1500ms));
  EXPECT_EQ(runner_->backlog(), 0) << "its own pending job is not others' backlog";
  std::string queued = local("n1");  // waits behind both
  EXPECT_TRUE(wait_until([&] { return runner_->backlog() == 1; }, 10s)) << queued;

  slurm::SlurmRestClient client(options());
  ASSERT_TRUE(client.cancel(std::stoll(taker)).is_ok());
  std::vector<cluster::WorkloadEvent> seen;
  ASSERT_TRUE(observe_until(key, cluster::WorkloadEventKind::kStarted, 30s, &seen));
  for (const cluster::WorkloadEvent& event : seen) {
    if (event.kind == cluster::WorkloadEventKind::kStarted) {
      EXPECT_NE(event.message.find("slurm: job " + std::to_string(first_job_of(key, "unit").job_id) + " on n1"),
                std::string::npos)
          << event.message;
    }
  }
  EXPECT_TRUE(running(key, 1).has_value());
  ASSERT_TRUE(client.cancel(std::stoll(queued)).is_ok());
  EXPECT_TRUE(wait_until([&] { return runner_->backlog() == 0; }, 10s));
}

// A copy whose job ended while the agent was down, and which Slurm then
// forgot (MinJobAge), is reported from the completion log as it ended:
// neither Lost nor submitted again. Its own dev Slurm forgets within
// seconds (slurmctld purges once a minute).
TEST_F(SlurmRunnerLive, AJobSlurmForgotWhileTheAgentWasDownIsReadFromTheCompletionLog) {
  DevSlurm forgetful;
  forgetful.up(1, 4, "--min-job-age 2");
  struct Down {
    DevSlurm& slurm;
    ~Down() { EXPECT_TRUE(slurm.down().empty()) << "the forgetful Slurm left processes behind"; }
  } down{forgetful};
  ASSERT_FALSE(forgetful.socket().empty());
  slurm::SlurmClientOptions client_options = options();
  client_options.endpoint.unix_socket = forgetful.socket();
  slurm::SlurmRestClient client(client_options);
  auto listed = [&] {
    auto jobs = client.jobs();
    return jobs.is_ok() ? *jobs : std::vector<slurm::SlurmJob>{};
  };

  const std::string key = "src/forgotten";
  runner_ = make_runner(forgetful);
  ASSERT_NE(runner_, nullptr);
  cluster::LaunchRequest request = nap(key, 1, "n1");
  request.spec.command = {"sh", "-c", "exit 3"};
  ASSERT_TRUE(runner_->launch(request).is_ok());
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = listed();
        return jobs.size() == 1 && jobs[0].state == "FAILED";
      },
      20s));
  runner_.reset();  // the agent is down while the job ends and is forgotten
  ASSERT_TRUE(wait_until([&] { return listed().empty(); }, 150s)) << "Slurm never forgot the job";

  runner_ = make_runner(forgetful);
  ASSERT_NE(runner_, nullptr);
  ASSERT_TRUE(runner_->launch(request).is_ok());  // the restored copy, re-attached
  std::vector<cluster::WorkloadEvent> seen;
  ASSERT_TRUE(observe_until(key, cluster::WorkloadEventKind::kFailed, 10s, &seen));
  for (const cluster::WorkloadEvent& event : seen) {
    EXPECT_NE(event.kind, cluster::WorkloadEventKind::kLost) << event.message;
    if (event.kind == cluster::WorkloadEventKind::kFailed) {
      EXPECT_EQ(event.exit_code, 3) << event.message;
    }
  }
  EXPECT_TRUE(listed().empty()) << "submitted again";
}

}  // namespace
}  // namespace shoal::testing
