// A cluster of declared nodes (the Cluster manifest's `nodes`) scheduled by
// the local fair-share scheduler, whose work a Runner carries out: the sim
// runner "runs" a workload for spec.sim.duration on the injected clock; the
// exec runner (exec_runner.h) runs processes on this host. The scheduler's
// accounting lives here once, whatever runs the work.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/cluster/cluster.h"
#include "agent/cluster/fair_share.h"

namespace shoal::cluster {

// What carries out reserved work. Keys are the Cluster's reservation keys.
class Runner {
 public:
  virtual ~Runner() = default;
  // As Cluster::launch: the same (uid, epoch) twice re-attaches.
  virtual Status launch(const LaunchRequest& request) = 0;
  // Ends `key`'s work, SIGKILL-equivalent after `grace`. True when nothing of
  // it runs any more (its room may be freed now); false when the runner will
  // report a kStopped event for `key` once it is gone. After stop() the key
  // may be launched again (a new epoch) while the old work still stops.
  virtual bool stop(const std::string& key, Duration grace) = 0;
  // Succeeded / Failed / Lost for launched keys, kStopped for stopped ones,
  // oldest first; kStarted too when reports_starts() (else NodeCluster
  // reports each launch Started).
  virtual std::vector<WorkloadEvent> observe(TimePoint now) = 0;
  virtual TimePoint next_event_at() const = 0;
  virtual void forget(const std::string& key) = 0;
  // How it runs `key`'s work, for people: the message of its Started event
  // (e.g. whether resource limits are enforced); "" when nothing is worth saying.
  virtual std::string describe(const std::string& key) const = 0;
  // As Cluster::unstarted_reason.
  virtual std::string unstarted_reason(const std::string&) const { return ""; }
  virtual Result<LogChunk> read_log(const std::string& key, int replica, int64_t offset,
                                    size_t max_bytes) const = 0;
  // Room on each node (by name) that work not this agent's holds, as the
  // runner last saw it: a shared backend (Slurm) whose own users submit to
  // it directly, or a node its manager has down (all of it). Empty for a
  // runner that owns its nodes.
  virtual std::map<std::string, model::Resources> room_taken_by_others() const { return {}; }
  // Ok while the runner can carry out new work; else why not.
  virtual Status health() const { return Status::ok(); }
  // As Cluster::warnings.
  virtual std::vector<std::string> warnings() const { return {}; }
  // As Cluster::api_stats.
  virtual std::optional<ApiStats> api_stats() const { return std::nullopt; }
  // Ok when the runner can run `spec` at all; else why it never can
  // ("NeverFits: ..."). By default a workload that names a container image
  // is refused: only a runner that runs images says otherwise.
  virtual Status supports(const model::WorkloadSpec& spec) const {
    if (spec.image.empty()) return Status::ok();
    return invalid_argument("NeverFits: spec.image: this cluster's backend runs commands, not container images");
  }
  // As Cluster::backlog, as the runner last saw it.
  virtual int64_t backlog() const { return 0; }
  // Nodes that joined since the runner last said (one that joined a
  // Kubernetes cluster), and known nodes whose allocatable or labels
  // changed (a device plugin registering its GPUs, an operator's label), as
  // they are now: the cluster schedules with them from now on. A node that
  // leaves stays, as room taken (room_taken_by_others).
  virtual std::vector<model::NodeSpec> take_node_changes() { return {}; }
  // True when the runner reports each launch's kStarted itself, once the
  // work really starts (a backend's own queue may hold it first); else
  // NodeCluster reports it at launch.
  virtual bool reports_starts() const { return false; }
};

// Runs a workload for spec.sim.duration of the injected clock, then ends it
// with spec.sim.exitCode. A restarted agent launches it again as of its
// first start, so it ends when it would have.
class SimRunner final : public Runner {
 public:
  Status launch(const LaunchRequest& request) override;
  bool stop(const std::string& key, Duration grace) override;
  std::vector<WorkloadEvent> observe(TimePoint now) override;
  TimePoint next_event_at() const override;
  void forget(const std::string&) override {}
  std::string describe(const std::string&) const override { return ""; }
  Result<LogChunk> read_log(const std::string&, int, int64_t, size_t) const override {
    return not_found("the sim backend runs nothing, so it keeps no output");
  }

 private:
  struct Run {
    TimePoint finish_at{};
    int32_t exit_code = 0;
  };
  std::map<std::string, Run> runs_;
  std::set<std::pair<TimePoint, std::string>> by_finish_;  // of runs_, soonest first
};

class NodeCluster final : public Cluster {
 public:
  // Refuses a manifest the scheduler cannot use (e.g. an unknown quota key).
  static Result<std::unique_ptr<NodeCluster>> create(model::ClusterSpec spec,
                                                     std::unique_ptr<Runner> runner);

  const model::ClusterSpec& spec() const override { return spec_; }
  Result<std::vector<std::string>> reserve(const std::string& key,
                                           const model::WorkloadSpec& spec) override;
  bool enqueue(const std::string& key, const model::WorkloadSpec& spec) override;
  void withdraw(const std::string& key) override;
  void set_priority(const std::string& key, int32_t priority) override;
  std::vector<Reserved> serve_queue() override;
  std::string queued_reason(const std::string& key) const override;
  Status fits_when_idle(const model::WorkloadSpec& spec) const override;
  std::optional<PreemptionCost> preemption_cost(
      const model::WorkloadSpec& spec,
      const std::function<bool(const std::string&)>& may_stop) const override;
  Result<Preemption> preempt(const std::string& key, const model::WorkloadSpec& spec,
                             const std::function<bool(const std::string&)>& may_stop,
                             TimePoint now) override;
  Status restore(const std::string& key, const model::WorkloadSpec& spec,
                 const std::vector<std::string>& nodes, Restored restored) override;
  Status restore_preempted(const std::string& key, const model::WorkloadSpec& spec,
                           const std::vector<std::string>& nodes, TimePoint now) override;
  void release(const std::string& key) override;
  void stop(const std::string& key, Duration grace) override;
  Status launch(const LaunchRequest& request) override;
  std::vector<WorkloadEvent> observe(TimePoint now) override;
  TimePoint next_event_at() const override;
  void forget(const std::string& key) override { runner_->forget(key); }
  std::string describe(const std::string& key) const override { return runner_->describe(key); }
  std::string unstarted_reason(const std::string& key) const override { return runner_->unstarted_reason(key); }
  Result<LogChunk> read_log(const std::string& key, int replica, int64_t offset,
                            size_t max_bytes) const override {
    return runner_->read_log(key, replica, offset, max_bytes);
  }
  CapacitySummary capacity() const override;
  CapacitySummary capacity_for(const std::string& namespace_name) const override;
  std::optional<CapacitySummary> capacity_for(const std::string& namespace_name,
                                              const std::string& queue) const override;
  uint64_t capacity_version() const override { return capacity_version_; }
  const std::vector<std::string>& queue_names() const override { return queue_names_; }
  const std::vector<NodeUsage>& nodes() const override { return usage_; }
  Status health() const override { return runner_->health(); }
  std::vector<std::string> warnings() const override { return runner_->warnings(); }
  std::optional<ApiStats> api_stats() const override { return runner_->api_stats(); }
  int64_t backlog() const override { return runner_->backlog(); }

  // Asserts the bookkeeping: allocations match holdings (stopping ones
  // included), nothing over capacity, the queue consistent and holding
  // nothing reserved.
  bool check_invariants() const;

 private:
  NodeCluster(model::ClusterSpec spec, FairShareScheduler scheduler, std::unique_ptr<Runner> runner);

  struct Holding {
    model::WorkloadSpec spec;
    std::vector<size_t> node_indexes;
    uint64_t held_seq = 0;   // when it was held: larger is later
    bool launched = false;   // launch() was called (deferred or not)
    // A preemptor: the victims whose room it took that still stop. Its
    // launch waits (`deferred`) until none is left.
    std::set<std::string> waits_for;
    std::optional<LaunchRequest> deferred;
    // A victim still stopping (in stopping_): the key its room went to. Its
    // room is no longer counted here; the preemptor's holding counts it.
    std::string preempted_for;
    // A victim restored after a restart (restore_preempted), still stopping:
    // it keeps its room until gone, then is reported Preempted.
    bool reports_preempted = false;
  };
  // How a preempted victim is reported once it is gone.
  static WorkloadEvent preempted_event(const std::string& victim, TimePoint at);
  // What the planner may stop: launched work that waits for nothing.
  std::vector<RunningWork> running_work() const;
  // Victim `victim` is gone: the preemptor (or orphan) that waits for it
  // waits no more for it, and launches (or frees its room) when it was the last.
  void victim_gone(const std::string& victim, const std::string& preemptor, TimePoint now,
                   std::vector<WorkloadEvent>* events);
  void allocate(size_t node, const model::Resources& amount);
  void hold(const std::string& key, const model::WorkloadSpec& spec, const std::vector<std::string>& nodes);
  void free_room(const Holding& holding);
  // Takes in the runner's room_taken_by_others(); true when some was freed.
  bool refresh_room_taken();
  // Takes the runner's node changes into spec_, usage_ and both
  // schedulers: a new node goes last (indexes held so far stay valid); a
  // known one takes its labels, and its capacity only grows: what it lost
  // below the most it had is withheld (room taken), so what is held never
  // exceeds its capacity. True when some room was added.
  bool take_nodes(const std::vector<model::NodeSpec>& nodes);
  // Grows the books' capacity of `nodes` (one entry per replica) until
  // `spec` fits beside what they hold, withholding the growth: a launched
  // copy restored onto a node that shrank while the agent was down. Not a
  // node where a restored victim still stops.
  void grow_to_hold(const model::WorkloadSpec& spec, const std::vector<std::string>& nodes);

  model::ClusterSpec spec_;
  std::vector<std::string> queue_names_;  // of spec_.queues, in order
  FairShareScheduler scheduler_;
  // The same cluster with nothing held (fits_when_idle places a workload
  // on it and takes it off again, so it stays empty between calls).
  mutable FairShareScheduler idle_scheduler_;
  std::vector<NodeUsage> usage_;  // parallel to spec_.nodes
  // Per node: its capacity minus its allocatable now, component-wise at
  // least 0 (take_nodes); counted in taken_by_others.
  std::vector<model::Resources> withheld_;
  // Bumped by everything that changes what capacity_for() reads: room held
  // (hold), freed (free_room), taken by others (refresh_room_taken) or
  // added (add_nodes), in usage_ and the scheduler alike.
  uint64_t capacity_version_ = 0;
  std::map<std::string, Holding> holdings_;
  std::set<std::string> unreported_starts_;  // launched, not yet reported Started
  // Work released while it ran, still stopping: its room stays held until
  // the runner reports it gone (oldest first per key).
  std::map<std::string, std::deque<Holding>> stopping_;
  // Preemptors released while their victims still stopped: the room they
  // took stays held until the last victim is gone.
  std::vector<std::pair<std::string, Holding>> orphans_;
  // Victims whose stop was immediate: reported by the next observe().
  std::vector<WorkloadEvent> preempted_;
  uint64_t held_seq_ = 0;
  ScheduleQueue queue_;
  std::unique_ptr<Runner> runner_;
};

// The sim backend: a NodeCluster with a SimRunner.
Result<std::unique_ptr<NodeCluster>> make_sim_cluster(model::ClusterSpec spec);

}  // namespace shoal::cluster
