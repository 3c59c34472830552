// The exec runner: each replica of a workload is a process on this host,
// started through shoal-exec-monitor (monitor_main.cc) in its own process
// group and directory, <work root>/<uid>/<replica>/, with its output in
// output.log there. The monitor outlives the agent: a restarted agent finds
// each replica by its directory (the epoch file, the monitor's lock, the
// exit file), re-adopts what still runs and reports what ended meanwhile,
// so no (uid, epoch) is ever started twice.
//
// Limits: where cgroup v2 is writable, each replica runs in its own cgroup
// with cpu.max and memory.max from spec.resources; elsewhere resources are
// only accounted by the scheduler. describe() says which.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/cluster/node_cluster.h"

namespace shoal::cluster {

struct ExecOptions {
  std::string work_root;     // <data>/work
  std::string monitor_path;  // the shoal-exec-monitor binary
  std::string cluster_name;  // for the workload's environment
  int64_t log_cap_bytes = 10 << 20;  // per replica; one rotated file more is kept
  // A directory under which this agent may create cgroups (cgroup v2,
  // writable); "" when there is none and limits are only accounted.
  std::string cgroup_root;
  // How long a finished workload's directory (its output) outlives the
  // agent's record of it.
  std::chrono::seconds keep_finished = std::chrono::hours(1);
};

// Where the agent may create cgroups: its own cgroup v2 directory if the
// unified hierarchy is mounted there and writable, else "".
std::string find_writable_cgroup();

// The shoal-exec-monitor that ships with the running binary: beside it (a
// build tree) or in ../lib/shoal (installed).
std::string default_monitor_path();

class ExecRunner final : public Runner {
 public:
  explicit ExecRunner(ExecOptions options);
  ~ExecRunner() override;

  Status launch(const LaunchRequest& request) override;
  bool stop(const std::string& key, Duration grace) override;
  std::vector<WorkloadEvent> observe(TimePoint now) override;
  TimePoint next_event_at() const override;
  void forget(const std::string& key) override;
  std::string describe(const std::string& key) const override;
  Result<LogChunk> read_log(const std::string& key, int replica, int64_t offset,
                            size_t max_bytes) const override;

  // The replica's directory (its output.log is the workload's log).
  std::string replica_dir(const std::string& uid, int replica) const;

 private:
  struct Replica {
    std::string dir;
    pid_t monitor = 0;        // 0: not known yet (adopted before the monitor wrote it)
    bool our_child = false;   // started by this process: reap it, trust its pid
    bool ended = false;
  };
  struct Run {
    std::string uid;
    uint64_t epoch = 0;
    std::vector<Replica> replicas;
    bool stopping_rest = false;  // a replica failed: the others are being stopped
    Duration grace{};
  };
  bool owns(const std::string& key) const;  // <work>/<uid>/owner names `key`
  std::optional<Run> find_unadopted(const std::string& key) const;
  Status start_replica(const LaunchRequest& request, int index, Replica& replica);
  bool refresh(Replica& replica);   // true when it has ended
  void signal_stop(Replica& replica, Duration grace);
  void sweep_forgotten();
  WorkloadEvent outcome(const std::string& key, const Run& run, TimePoint now) const;

  ExecOptions options_;
  std::map<std::string, Run> runs_;
  std::map<std::string, std::vector<Run>> stopping_;  // released, not yet gone
  TimePoint last_observe_{};
  TimePoint next_sweep_{};
};

}  // namespace shoal::cluster
