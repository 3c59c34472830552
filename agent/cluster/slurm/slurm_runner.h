// The slurm backend (docs/backends.md): a NodeCluster whose nodes
// are a Slurm partition's and whose work SlurmRunner hands to Slurm, one
// batch job per copy, through slurmrestd.
//
// Every REST call runs on the runner's own thread; the agent's loop only
// reads that thread's latest snapshot (node states, our jobs' states) and
// queues submissions and cancels. A slow or dead slurmrestd therefore never
// blocks the loop: the runner turns unhealthy (the agent answers candidates
// BackendUnavailable) and recovers when slurmrestd answers again.
//
// Exactly once: a copy's job carries the tag "shoal cluster=C key=K epoch=E"
// in its comment, and a marker file <state>/<key>.<epoch> is made durable
// before the job is submitted. A restarted agent lists every job first and
// re-adopts the one with its tag; a marker without a job (Slurm forgot it,
// or the submission never arrived) is never submitted again: the copy is
// reported from the completion log if one is configured, else Lost.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/cluster/node_cluster.h"
#include "agent/cluster/slurm/slurm_rest.h"
#include "model/manifest.h"

namespace shoal::cluster::slurm {

// The client options `spec` asks for: the endpoint parsed, the JWT read
// from spec.tokenFile. One-line errors naming the field.
Result<SlurmClientOptions> client_options(const model::SlurmSpec& spec);

// The nodes of spec.partition (every node when none is named) as the
// cluster's nodes: cpus and real memory, labelled slurm.partition.
Result<std::vector<model::NodeSpec>> discover_nodes(const model::SlurmSpec& spec);

// The tag a copy's job carries, and its reading.
struct JobTag {
  std::string cluster;
  std::string key;
  uint64_t epoch = 0;
};
std::string format_tag(const JobTag& tag);
std::optional<JobTag> parse_tag(std::string_view comment);

// A gang's files: each task's output (srun's %t: the task's number), and
// where failed tasks leave their exit codes.
struct GangFiles {
  std::string task_output;
  std::string exit_codes;
};
// The batch script that runs `command` + `args` (each word single-quoted).
// For a gang (replicas as the job's tasks) srun starts every task, each
// with SHOAL_REPLICA and SHOAL_NODE set; a task that fails ends the others,
// and the job exits with the first failed task's code.
std::string batch_script(const std::vector<std::string>& command,
                         const std::vector<std::string>& args, const GangFiles& gang = {});

struct SlurmRunnerOptions {
  model::SlurmSpec spec;
  SlurmClientOptions client;
  std::string cluster_name;
  std::string state_dir;   // <data>/slurm: the submission markers
  std::string output_dir;  // spec.outputDir or /var/tmp/shoal-<cluster>-slurm-output
  std::chrono::milliseconds poll_interval{250};
  // How long a finished copy's output outlives the agent's record of it.
  std::chrono::seconds keep_finished = std::chrono::hours(1);
};

class SlurmRunner final : public Runner {
 public:
  // Creates the state and output directories and starts the thread.
  static Result<std::unique_ptr<SlurmRunner>> create(SlurmRunnerOptions options);
  ~SlurmRunner() override;

  Status launch(const LaunchRequest& request) override;
  bool stop(const std::string& key, Duration grace) override;
  std::vector<WorkloadEvent> observe(TimePoint now) override;
  TimePoint next_event_at() const override;
  void forget(const std::string& key) override;
  std::string describe(const std::string& key) const override;
  // A pending job's Slurm reason: "Slurm job N pending: Resources".
  std::string unstarted_reason(const std::string& key) const override;
  Result<LogChunk> read_log(const std::string& key, int replica, int64_t offset,
                            size_t max_bytes) const override;
  std::map<std::string, model::Resources> room_taken_by_others() const override;
  Status health() const override;
  Status supports(const model::WorkloadSpec& spec) const override;
  int64_t backlog() const override;
  bool reports_starts() const override { return true; }

  // The output file of `key`'s copy of `epoch` (its batch script's; a
  // gang's replicas write their own: replica_output_path).
  std::string output_path(const std::string& key, uint64_t epoch) const;
  std::string replica_output_path(const std::string& key, uint64_t epoch, int replica) const;

 private:
  explicit SlurmRunner(SlurmRunnerOptions options);

  // The epochs of a key a stop is about: the launched copy's one, or for
  // a copy restored after a restart and never launched, every epoch this
  // agent submitted for the key before (a relaunch's newer epoch is not
  // the old work).
  struct Epochs {
    uint64_t first = 0, last = 0;  // inclusive
  };
  // What the loop asks of the thread.
  struct Command {
    enum class Kind { kSubmit, kCancel } kind;
    JobTag tag;               // kSubmit: the copy; kCancel: the key
    Epochs epochs;            // kCancel
    SlurmJobRequest request;  // kSubmit
    bool tried = false;       // kSubmit: sent once without an answer (its marker exists)
  };
  // What the thread last saw, and what it did with the commands.
  struct Snapshot {
    bool listed = false;  // every job was listed once since the thread started
    Status reachable = Status::ok();
    std::vector<SlurmNode> nodes;
    std::map<int64_t, SlurmJob> jobs;  // ours (tag and user), as last seen
    std::map<std::pair<std::string, uint64_t>, int64_t> job_of;  // (key, epoch) -> job id
    std::map<std::pair<std::string, uint64_t>, std::string> refused;  // submissions Slurm refused
    std::set<int64_t> others_pending;  // jobs not ours pending in the partition
  };
  // A copy the loop launched.
  struct Run {
    uint64_t epoch = 0;
    model::Resources per_node;
    std::vector<std::string> nodes;  // one per replica, as reserved
    bool submitted_before = false;   // its marker existed at launch: never submit again
    int64_t remembered_job_id = 0;   // what the marker says Slurm called it (0: unknown)
    bool start_reported = false;     // its kStarted went out (Slurm showed it started)
  };
  // A stopped copy whose job Slurm has not yet shown ended.
  struct Stop {
    Epochs epochs;
    Run run;  // as launched (no nodes for a copy restored and never launched)
  };

  void work();                         // the thread
  void cycle(SlurmRestClient& client);  // one poll: list, then carry out commands
  std::string marker_path(const std::string& key, uint64_t epoch) const;
  // How the copy ended, or nullopt while it has not (or the thread has not
  // seen it yet). `snapshot` is locked by the caller.
  std::optional<WorkloadEvent> outcome(const std::string& key, const Run& run,
                                       const Snapshot& snapshot, TimePoint now) const;
  std::optional<SlurmJob> from_completion_log(int64_t job_id) const;
  // The ids of `key`'s unfinished jobs in `epochs`. `snapshot` is locked by the caller.
  static std::vector<int64_t> unfinished_jobs(const Snapshot& snapshot, const std::string& key,
                                              Epochs epochs);
  // Whether `job`, tagged with this cluster, is this agent's: one it
  // submitted, or one run as the user its jobs run as (a tag alone is not
  // enough: anyone may write a comment). Learns that user from the first
  // job it submits. The thread's, with `mutex_` held.
  bool owned(const SlurmJob& job);
  void sweep_forgotten();

  SlurmRunnerOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_thread_ = false;
  bool new_command_ = false;  // wakes the thread before its interval ends
  std::deque<Command> commands_;
  Snapshot snapshot_;
  int64_t listed_since_ = 0;  // the next incremental listing's update_time
  std::thread thread_;

  // The thread's own.
  std::string job_user_;           // spec.userName, or learned (and kept in <state>/user)
  std::set<int64_t> submitted_;    // submitted in this life, until listed once

  // The loop's own (no lock: only the loop thread touches them).
  std::map<std::string, Run> runs_;
  std::map<std::string, std::deque<Stop>> stopping_;  // oldest first
  // The newest epoch with a marker, by file stem: what a restored copy's
  // stop is about, and whose output read_log shows when none runs.
  std::map<std::string, uint64_t> newest_marker_;
  TimePoint last_observe_{};
  TimePoint next_sweep_{};
};

}  // namespace shoal::cluster::slurm
