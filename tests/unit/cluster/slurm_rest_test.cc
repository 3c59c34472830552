// The slurmrestd answer parsers (agent/cluster/slurm/slurm_rest.h), on
// answers as slurmrestd 22.05 (v0.0.38) gives them, trimmed.
#include "agent/cluster/slurm/slurm_rest.h"
#include "agent/cluster/slurm/slurm_runner.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace shoal::cluster::slurm {
namespace {

TEST(SlurmEndpoint, UnixSocketsAndHttpAreReadAndAnythingElseIsNamed) {
  auto unix_socket = parse_slurm_endpoint("unix:///run/slurmrestd/rest.sock");
  ASSERT_TRUE(unix_socket.is_ok()) << unix_socket.status().message();
  EXPECT_EQ(unix_socket->unix_socket, "/run/slurmrestd/rest.sock");
  auto tcp = parse_slurm_endpoint("http://slurm.example:6820/");
  ASSERT_TRUE(tcp.is_ok());
  EXPECT_EQ(tcp->base_url, "http://slurm.example:6820");
  EXPECT_TRUE(tcp->unix_socket.empty());
  for (const char* bad : {"", "unix://relative.sock", "https://h:1", "http://h:1/path", "tcp://h:1"}) {
    auto refused = parse_slurm_endpoint(bad);
    ASSERT_FALSE(refused.is_ok()) << bad;
    EXPECT_NE(refused.status().message().find("spec.slurm.endpoint: expected unix:///"),
              std::string::npos)
        << refused.status().message();
  }
}

TEST(SlurmNodes, StatesAndAllocationsAreReadAndDrainedOrDownNodesAreNotUsable) {
  auto nodes = parse_nodes(R"({"meta": {}, "errors": [], "nodes": [
      {"name": "n1", "state": "mixed", "state_flags": [], "cpus": 8, "alloc_cpus": 2,
       "idle_cpus": 6, "real_memory": 16384, "alloc_memory": 512, "free_memory": 23483,
       "reason": "", "partitions": ["dev"]},
      {"name": "n2", "state": "idle", "state_flags": ["DRAIN"], "cpus": 8, "alloc_cpus": 0,
       "real_memory": 16384, "alloc_memory": 0, "reason": "maintenance"},
      {"name": "n3", "state": "down", "state_flags": ["NOT_RESPONDING"], "cpus": 8,
       "alloc_cpus": 0, "real_memory": 16384, "alloc_memory": 0, "reason": "Not responding"},
      {"name": "n4", "state": "allocated", "cpus": 8, "alloc_cpus": 8, "real_memory": 16384,
       "alloc_memory": 8192}]})");
  ASSERT_TRUE(nodes.is_ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 4u);
  const SlurmNode& n1 = (*nodes)[0];
  EXPECT_EQ(n1.name, "n1");
  EXPECT_EQ(n1.cpus, 8);
  EXPECT_EQ(n1.alloc_cpus, 2);
  EXPECT_EQ(n1.real_memory_mib, 16384);
  EXPECT_EQ(n1.alloc_memory_mib, 512);
  EXPECT_TRUE(n1.usable());
  EXPECT_FALSE((*nodes)[1].usable());  // drained
  EXPECT_EQ((*nodes)[1].reason, "maintenance");
  EXPECT_FALSE((*nodes)[2].usable());  // down
  EXPECT_TRUE((*nodes)[3].usable());   // full, but up
}

TEST(SlurmJobs, TheRawWaitStatusIsSplitIntoExitCodeAndSignal) {
  auto jobs = parse_jobs(R"({"jobs": [
      {"job_id": 1, "name": "shoal-a", "comment": "shoal uid=a epoch=1", "user_name": "slurm",
       "partition": "dev",
       "job_state": "FAILED",
       "state_reason": "NonZeroExitCode", "exit_code": 768, "nodes": "n1",
       "start_time": 1795557423, "end_time": 1795557424, "standard_output": "/o/a.log"},
      {"job_id": 2, "name": "b", "job_state": "CANCELLED", "exit_code": 15, "nodes": "n2"},
      {"job_id": 3, "name": "c", "job_state": "PENDING", "state_reason": "Resources",
       "exit_code": 0}]})");
  ASSERT_TRUE(jobs.is_ok()) << jobs.status().message();
  ASSERT_EQ(jobs->size(), 3u);
  const SlurmJob& failed = (*jobs)[0];
  EXPECT_EQ(failed.job_id, 1);
  EXPECT_EQ(failed.comment, "shoal uid=a epoch=1");
  EXPECT_EQ(failed.user_name, "slurm");
  EXPECT_EQ(failed.partition, "dev");
  EXPECT_EQ((*jobs)[1].user_name, "");  // absent
  EXPECT_EQ(failed.exit_code, 3);  // 768 = 3 << 8
  EXPECT_EQ(failed.signal, 0);
  EXPECT_EQ(failed.start_time, 1795557423);
  EXPECT_EQ(failed.standard_output, "/o/a.log");
  EXPECT_TRUE(failed.finished());
  EXPECT_EQ((*jobs)[1].signal, 15);  // killed by SIGTERM
  EXPECT_EQ((*jobs)[1].exit_code, 0);
  EXPECT_FALSE((*jobs)[2].finished());
  EXPECT_EQ((*jobs)[2].state_reason, "Resources");
}

TEST(SlurmJobs, AnEmptyAnswerIsNoChangeAndMalformedOnesAreNamed) {
  // slurmrestd answers an update_time with nothing newer with no body.
  auto none = parse_jobs("");
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
  struct Case {
    const char* body;
    const char* expected;
  };
  for (const Case& bad : {Case{"not json", "expected a JSON object"},
                          Case{R"({"errors": []})", "jobs: expected a list"},
                          Case{R"({"jobs": [{"job_id": "seven"}]})", "jobs[].job_id: expected a number"},
                          Case{R"({"jobs": [{"job_id": 0}]})", "jobs[].job_id: expected a positive"},
                          Case{R"({"jobs": [3]})", "jobs[]: expected an object"}}) {
    auto refused = parse_jobs(bad.body);
    ASSERT_FALSE(refused.is_ok()) << bad.body;
    EXPECT_NE(refused.status().message().find(bad.expected), std::string::npos)
        << refused.status().message();
  }
  auto bad_nodes = parse_nodes(R"({"nodes": [{"name": "n1", "cpus": "eight"}]})");
  ASSERT_FALSE(bad_nodes.is_ok());
  EXPECT_NE(bad_nodes.status().message().find("nodes[].cpus: expected a number, got string"),
            std::string::npos)
      << bad_nodes.status().message();
}

TEST(SlurmSubmit, TheRequestCarriesTheTagAndAnEnvironmentAndErrorsAreSlurmsOwnWords) {
  SlurmJobRequest request;
  request.name = "shoal-train";
  request.comment = "shoal uid=u1 epoch=3 copy=0";
  request.partition = "dev";
  request.script = "#!/bin/sh\nexec true\n";
  request.cpus_per_task = 2;
  request.memory_per_node_mib = 512;
  request.standard_output = "/out/train.log";
  auto encoded = nlohmann::json::parse(encode_submit(request));
  EXPECT_EQ(encoded["script"], "#!/bin/sh\nexec true\n");
  EXPECT_EQ(encoded["job"]["comment"], "shoal uid=u1 epoch=3 copy=0");
  EXPECT_EQ(encoded["job"]["cpus_per_task"], 2);
  EXPECT_EQ(encoded["job"]["memory_per_node"], 512);
  EXPECT_EQ(encoded["job"]["partition"], "dev");
  EXPECT_FALSE(encoded["job"].contains("account"));
  EXPECT_FALSE(encoded["job"].contains("distribution"));
  EXPECT_FALSE(encoded["job"].contains("memory_per_cpu"));
  // A gang: a task per replica, laid out as listed, memory per cpu.
  request.tasks = 3;
  request.node_list = "n1,n1,n2";
  request.distribution = "arbitrary";
  request.memory_per_node_mib = 0;
  request.memory_per_cpu_mib = 128;
  auto gang = nlohmann::json::parse(encode_submit(request));
  EXPECT_EQ(gang["job"]["tasks"], 3);
  EXPECT_EQ(gang["job"]["node_list"], "n1,n1,n2");
  EXPECT_EQ(gang["job"]["distribution"], "arbitrary");
  EXPECT_EQ(gang["job"]["memory_per_cpu"], 128);
  EXPECT_FALSE(gang["job"].contains("memory_per_node"));
  // slurmrestd answers 400 to a submission without one.
  EXPECT_TRUE(encoded["job"]["environment"].contains("PATH"));

  auto id = parse_submitted_job_id(R"({"errors": [], "job_id": 42, "step_id": "BATCH"})");
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(*id, 42);
  auto refused = parse_submitted_job_id(
      R"({"errors": [{"description": "Requested node configuration is not available",
          "error_number": 2014}], "job_id": 0})");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("Requested node configuration is not available"),
            std::string::npos)
      << refused.status().message();
}

TEST(SlurmJobComp, AFinishedJobIsReadFromItsCompletionLine) {
  auto job = parse_jobcomp_line(
      "JobId=12 UserId=shoal-slurm(999) GroupId=shoal-slurm(995) Name=shoal-a JobState=FAILED "
      "Partition=dev TimeLimit=UNLIMITED StartTime=2026-11-24T21:56:33 "
      "EndTime=2026-11-24T21:56:33 NodeList=n1 NodeCnt=1 ProcCnt=1 WorkDir=/tmp "
      "DerivedExitCode=0:0 ExitCode=3:0");
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->job_id, 12);
  EXPECT_EQ(job->state, "FAILED");
  EXPECT_EQ(job->name, "shoal-a");
  EXPECT_EQ(job->nodes, "n1");
  EXPECT_EQ(job->exit_code, 3);
  EXPECT_EQ(job->signal, 0);
  EXPECT_FALSE(parse_jobcomp_line("").has_value());
  EXPECT_FALSE(parse_jobcomp_line("JobId=x JobState=FAILED").has_value());
  EXPECT_FALSE(parse_jobcomp_line("JobState=COMPLETED").has_value());
}

TEST(SlurmRunnerTest, ATagReadsBackAndAnythingElseIsNotOurs) {
  JobTag tag{"east", "0a1b2c/u-1", 42};
  std::optional<JobTag> read = parse_tag(format_tag(tag));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->cluster, "east");
  EXPECT_EQ(read->key, "0a1b2c/u-1");
  EXPECT_EQ(read->epoch, 42u);
  // Comments are anyone's text: only a whole tag counts.
  for (const char* comment : {"", "shoal", "shoal cluster=east key=k", "shoal cluster=east key=k epoch=-1",
                              "shoal cluster=east key=k epoch=1x", "shoal cluster= key=k epoch=1",
                              "shoal cluster=east key=k epoch=99999999999999999999999",
                              "my job cluster=east key=k epoch=1", "shoal cluster=east junk key=k epoch=1"}) {
    EXPECT_FALSE(parse_tag(comment).has_value()) << comment;
  }
}

TEST(SlurmRunnerTest, TheBatchScriptQuotesEveryWord) {
  EXPECT_EQ(batch_script({"sh", "-c", "echo 'hi'; exit 3"}, {"$HOME"}),
            "#!/bin/sh\nexec 'sh' '-c' 'echo '\\''hi'\\''; exit 3' '$HOME'\n");
  // A gang: srun starts the tasks, each told its replica and node; the job
  // exits with the first failed task's code.
  EXPECT_EQ(batch_script({"echo", "hi"}, {}, {"/out/k.1.%t.log", "/out/k.1.exit"}),
            "#!/bin/sh\nsrun --kill-on-bad-exit=1 --output='/out/k.1.%t.log' /bin/sh -c "
            "'export SHOAL_REPLICA=$SLURM_PROCID SHOAL_NODE=$SLURMD_NODENAME; \"$@\"; code=$?; "
            "if [ $code -ne 0 ]; then echo $code >> '\\''/out/k.1.exit'\\''; fi; exit $code' "
            "shoal-replica 'echo' 'hi'\ncode=$?\n"
            "if [ -s '/out/k.1.exit' ]; then read first < '/out/k.1.exit'; exit \"$first\"; fi\n"
            "exit $code\n");
}

}  // namespace
}  // namespace shoal::cluster::slurm
