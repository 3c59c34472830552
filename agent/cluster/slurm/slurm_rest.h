// slurmrestd's REST API (OpenAPI v0.0.38, Slurm 22.05) as the slurm backend
// uses it (docs/backends.md): node states for capacity, job
// submission with a tag, incremental job states, cancel, and the completion
// lines of jobcomp/filetxt for jobs Slurm has already forgotten.
//
// The parsers are pure (fuzzed and unit-tested on slurmrestd's own answers);
// SlurmRestClient does the HTTP over a unix socket (local auth: the caller's
// uid) or TCP with a JWT (X-SLURM-USER-NAME / X-SLURM-USER-TOKEN), each call
// bounded by a timeout. It blocks for at most that long: the backend calls it
// off the agent's loop.
//
// The backend over it is SlurmRunner (slurm_runner.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cluster/http/http_client.h"
#include "common/status.h"

namespace shoal::cluster::slurm {

// Where slurmrestd listens: "unix:///path/rest.sock" or "http://host:port".
struct SlurmEndpoint {
  std::string unix_socket;  // set for unix://
  std::string base_url;     // "http://host:port" (for a unix socket, "http://localhost")
};
// A one-line error naming `field` when `text` is neither form.
Result<SlurmEndpoint> parse_slurm_endpoint(const std::string& text,
                                           const std::string& field = "spec.slurm.endpoint");

struct SlurmNode {
  std::string name;
  std::string state;                     // idle, mixed, allocated, down, drained, ...
  std::vector<std::string> state_flags;  // DRAIN, NOT_RESPONDING, ...
  int64_t cpus = 0;
  int64_t alloc_cpus = 0;
  int64_t real_memory_mib = 0;
  int64_t alloc_memory_mib = 0;
  std::string reason;
  std::vector<std::string> partitions;
  // Up and schedulable: neither down nor drained/draining nor failing. Nodes
  // that are not count as absent from the cluster's capacity.
  bool usable() const;
};

struct SlurmJob {
  int64_t job_id = 0;
  std::string name;
  std::string comment;
  std::string user_name;     // whom it runs as
  std::string partition;     // "dev"; a pending job may name several: "dev,big"
  std::string state;         // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
  std::string state_reason;  // "None", "Resources", "JobLaunchFailure", ...
  // Slurm's exit_code is a raw wait status: exit 3 reads 768.
  int32_t exit_code = 0;     // the process's exit code (WEXITSTATUS)
  int32_t signal = 0;        // the signal that ended it, 0 if none
  std::string nodes;         // "n1" or "n[1-2]"
  int64_t start_time = 0;    // unix seconds, 0 if not started
  int64_t end_time = 0;
  std::string standard_output;
  // A state from which the job does not change any more.
  bool finished() const;
};

// What one submission asks for (one Slurm job per copy of a workload).
struct SlurmJobRequest {
  std::string name;
  std::string comment;  // the backend's tag: uid, epoch and copy
  std::string partition;
  std::string account;
  std::string script;  // the batch script, "#!/bin/sh\n..."
  std::map<std::string, std::string> environment;
  std::string working_directory;
  std::string standard_output;
  std::string standard_error;  // "" to interleave with standard_output
  int64_t tasks = 1;
  int64_t cpus_per_task = 1;
  int64_t memory_per_node_mib = 0;  // 0: the partition's default (or per cpu)
  int64_t memory_per_cpu_mib = 0;   // instead of per node, for tasks laid out unevenly
  std::string node_list;  // "n1,n2": exactly these nodes ("" : Slurm chooses)
  // "arbitrary": task i runs on the i-th entry of node_list (which then
  // names a node once per task on it); "" : Slurm's default.
  std::string distribution;
};

// Each returns a one-line error naming what was expected where.
Result<std::vector<SlurmNode>> parse_nodes(std::string_view body);
// An empty body is "no job changed" (slurmrestd's answer to an update_time
// with nothing newer).
Result<std::vector<SlurmJob>> parse_jobs(std::string_view body);
Result<int64_t> parse_submitted_job_id(std::string_view body);
std::string encode_submit(const SlurmJobRequest& request);
// The errors slurmrestd put in an answer, one line; "" when none.
std::string slurm_errors(std::string_view body);
// One line of jobcomp/filetxt ("JobId=3 UserId=... JobState=FAILED ...
// ExitCode=3:0"); nullopt for a line that is not one.
std::optional<SlurmJob> parse_jobcomp_line(std::string_view line);

struct SlurmClientOptions {
  SlurmEndpoint endpoint;
  std::string api_version = "v0.0.38";
  std::string user_name;  // TCP with JWT only
  std::string token;
  std::chrono::milliseconds timeout{2000};
};

class SlurmRestClient {
 public:
  explicit SlurmRestClient(SlurmClientOptions options);
  SlurmRestClient(const SlurmRestClient&) = delete;
  SlurmRestClient& operator=(const SlurmRestClient&) = delete;

  // Unavailable (with what failed) when slurmrestd does not answer within
  // the timeout or answers with an error.
  Status ping();
  Result<std::vector<SlurmNode>> nodes();
  // Jobs changed since `since` (unix seconds; 0: every job Slurm still knows).
  Result<std::vector<SlurmJob>> jobs(int64_t since = 0);
  // NotFound once Slurm has forgotten the job (MinJobAge).
  Result<SlurmJob> job(int64_t job_id);
  // InvalidArgument when Slurm refused the job (its reason); Unavailable when
  // it did not answer (the job may still have been accepted).
  Result<int64_t> submit(const SlurmJobRequest& request);
  Status cancel(int64_t job_id);

 private:
  using Answer = http::Answer;
  Result<Answer> call(const char* method, const std::string& path, const std::string& body);

  SlurmClientOptions options_;
  http::Client http_;  // reused, so its connection is kept
};

}  // namespace shoal::cluster::slurm
