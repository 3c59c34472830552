// The cluster backend interface: how the agent core reserves, launches,
// stops and observes work on the cluster it runs beside. Implementations:
// NodeCluster (node_cluster.h: the local fair-share scheduler over declared
// nodes) with a sim or exec runner; docs/backends.md maps the same calls onto
// Kubernetes and Slurm.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/cluster/fair_share.h"
#include "common/histogram.h"
#include "common/status.h"
#include "common/time.h"
#include "model/manifest.h"
#include "model/resources.h"
#include "model/workload.h"

namespace shoal::cluster {

struct NodeUsage {
  std::string name;
  model::Resources capacity;
  model::Resources allocated;
  model::Resources peak_allocated;  // the most ever allocated at once: proof of no over-commit
  model::Resources taken_by_others;  // held by work not this agent's (a shared backend)
};

struct CapacitySummary {
  model::Resources free;               // sum over nodes
  model::Resources largest_free_node;  // per resource, the most free on any one node
};

// What a backend observed of launched work. kSucceeded is exit 0; kFailed
// carries the exit code and a reason; kLost is work the backend can no longer
// account for (its processes vanished without an exit status, e.g. while the
// agent was down: reason AgentRestart). kStopped says work stopped after
// release() or stop() is gone and its room free again (no key reservation
// remains; the core only advertises the room); with an empty key, room that
// others' work held on a shared backend is free again. kWaiting says why
// launched work that has not started waits, when the backend's reason is
// not the usual start (an image it cannot pull, a missing Secret); its
// message is that reason, empty once there is none. It changes no room.
enum class WorkloadEventKind { kStarted, kSucceeded, kFailed, kLost, kStopped, kWaiting };

// Who ended a kFailed copy: the job itself (its exit code, its own process
// killed for memory), or the cluster around it. A copy the cluster ended is
// placed again by its source whatever its restartPolicy.
enum class EndCause : uint8_t {
  kOwn = 0,     // the job: an exit code, or a signal its own process earned
  kNodeFailed,  // its node failed under it
  kEvicted,     // the cluster's people or policies ended it (a cancel not ours)
  kPreempted,   // the cluster's scheduler gave its room to other work
};

struct WorkloadEvent {
  std::string key;
  WorkloadEventKind kind;
  TimePoint at;
  int32_t exit_code = 0;
  std::string message;
  EndCause cause = EndCause::kOwn;  // kFailed only
};

// One launch of a reserved workload. Launching the same (uid, epoch) again —
// after an agent restart, say — re-attaches to what already runs or reports
// how it ended: a backend never runs one (uid, epoch) twice.
struct LaunchRequest {
  std::string key;   // the reservation's key, "<source>/<uid>"
  std::string uid;   // the workload's, as its source named it
  uint64_t epoch = 0;
  std::string source_cluster;  // for the workload's environment
  model::WorkloadSpec spec;
  std::vector<std::string> nodes;  // one per replica, as reserved
  TimePoint started_at;  // the first start of this epoch (a re-attach keeps it)
};

// A piece of one replica's output (stdout and stderr, interleaved).
struct LogChunk {
  std::string data;
  int64_t offset = 0;       // where `data` starts in the replica's current log file
  int64_t next_offset = 0;  // where the next read goes on
  bool finished = false;    // the replica has ended: nothing follows next_offset
  // The backend is reading the output now (from a remote API) and holds
  // nothing for this window yet: `data` is empty; ask again shortly.
  bool pending = false;
};

// What admitting a workload by preemption costs (Cluster::preemption_cost).
struct PreemptionCost {
  int32_t victims = 0;           // whole workloads to stop
  int32_t highest_priority = 0;  // the highest priority among them
};

// A preemption carried out (Cluster::preempt).
struct Preemption {
  std::vector<std::string> nodes;    // the preemptor's, one per replica
  std::vector<std::string> victims;  // keys of the work stopped for it
};

// A backend's calls to its manager's API, as /metrics shows them.
struct ApiStats {
  // Latency in seconds, by (verb, HTTP status or "none" when no answer
  // came): verbs POST, DELETE, GET (logs, probes), LIST (one page), WATCH
  // (how long it stayed open).
  std::map<std::pair<std::string, std::string>, Histogram> calls;
  int64_t lists = 0;            // whole lists (every page): at start and after a 410
  int64_t watches_resumed = 0;  // watches that broke and went on from their version
  int64_t queued = 0;           // calls waiting or backing off now
  int64_t refused = 0;          // creates the server refused (4xx)
  int64_t given_up = 0;         // creates given up after their last try
};

class Cluster {
 public:
  virtual ~Cluster() = default;

  virtual const model::ClusterSpec& spec() const = 0;

  // Holds room for every replica of `spec` under `key`, all or nothing, as
  // the local scheduler decides (queues, quotas, node selector and order),
  // never over-committing a node. Returns one node name per replica, or the
  // scheduler's reason (NoNodeFits, QuotaExceeded:cpu, NoSuchQueue:q, ...).
  virtual Result<std::vector<std::string>> reserve(const std::string& key,
                                                   const model::WorkloadSpec& spec) = 0;
  // The local scheduler's queue. Work queued under `key`
  // waits, in the order the scheduler serves queues and namespaces, until a
  // pass of serve_queue() reserves it or it is withdrawn. False if `key` is
  // already queued (it keeps its place) or already holds a reservation.
  virtual bool enqueue(const std::string& key, const model::WorkloadSpec& spec) = 0;
  // Takes `key` out of the queue; a no-op for one not queued.
  virtual void withdraw(const std::string& key) = 0;
  // The work held under `key` now has `priority` (its source changed it):
  // preemption weighs it so from now on. A no-op for a key not held (a
  // queued one takes its new place by being withdrawn and queued again).
  virtual void set_priority(const std::string& key, int32_t priority) = 0;
  struct Reserved {
    std::string key;
    std::vector<std::string> nodes;  // one per replica
  };
  // One fair-share pass over the queue: reserves, all replicas or nothing and
  // as reserve() does, what fits now, takes it out of the queue and returns
  // it. Its cost grows with what it reserves and the kinds of work queued,
  // not with the length of the queue.
  virtual std::vector<Reserved> serve_queue() = 0;
  // Why queued `key` was not reserved by the last pass ("" before one did).
  virtual std::string queued_reason(const std::string& key) const = 0;
  // Whether `spec` could be reserved here if nothing else held anything:
  // ok, or the reason it never can (NoNodeFits, QuotaExceeded:cpu, ...).
  // Work that fails only for want of free room now is worth queuing.
  virtual Status fits_when_idle(const model::WorkloadSpec& spec) const = 0;
  // Preemption, under the cluster's spec.preemption (docs/scheduling.md).
  // `may_stop(key)` says whether the work reserved under `key` may be
  // stopped for this workload (whose it is matters: invitations decide).
  // What reserving `spec` by stopping running work would cost now; nullopt
  // when preemption is off here or no such victims would make room.
  // Changes nothing.
  virtual std::optional<PreemptionCost> preemption_cost(
      const model::WorkloadSpec& spec, const std::function<bool(const std::string&)>& may_stop) const = 0;
  // Reserves room for `key` as a fresh plan decides: its victims are
  // stopped with their own terminationGracePeriod and their room passes to
  // `key` at once (nothing else can take it), while `key`'s launch waits
  // until every victim is gone. Each victim is reported kFailed, cause
  // kPreempted, once it is gone (one whose stop is immediate, as of `now`).
  // Unavailable when no plan makes room now.
  virtual Result<Preemption> preempt(const std::string& key, const model::WorkloadSpec& spec,
                                     const std::function<bool(const std::string&)>& may_stop,
                                     TimePoint now) = 0;
  // How far a copy restored after a restart had got before it.
  enum class Restored {
    kReserved,  // never launched: nothing of it runs
    kLaunched,  // launched (bound): its work may run on its nodes
  };
  // Re-establishes a reservation on the given nodes (after a restart).
  // Unavailable when a node is gone, or when a copy no longer fits that
  // is kReserved, or kLaunched onto a node where a victim restored by
  // restore_preempted still stops (the victim's preemptor, whose launch
  // waited for it: it must not start beside it). Otherwise a kLaunched
  // copy is held even on a node whose capacity shrank while the agent was
  // down: it may run there, and refused, it would be placed again while it
  // still ran. The shortfall is withheld, as for a node that shrinks under
  // held work, so nothing new goes there until the held work left room.
  virtual Status restore(const std::string& key, const model::WorkloadSpec& spec,
                         const std::vector<std::string>& nodes, Restored restored) = 0;
  // After a restart, a victim that was still stopping when the agent went
  // down: its room on `nodes` is held again until it is gone (so nothing
  // else starts beside it, the preemptor included), it is stopped again
  // with its own grace, and it is reported kFailed, cause kPreempted, once
  // gone (as of `now` when nothing of it runs). Restore every such victim
  // before the reservations that may want its room.
  virtual Status restore_preempted(const std::string& key, const model::WorkloadSpec& spec,
                                   const std::vector<std::string>& nodes, TimePoint now) = 0;
  // Gives up `key`: a reservation is freed; launched work is stopped as
  // stop() does with the workload's own terminationGracePeriod. A no-op for
  // an unknown key. The key may be reserved again at once.
  virtual void release(const std::string& key) = 0;
  // Releases `key`, stopping launched work with `grace` between the polite
  // signal and the forced one. Its room stays held until the work is gone
  // (a kStopped event), so a node is never over-committed by work stopping.
  virtual void stop(const std::string& key, Duration grace) = 0;
  // Runs the reserved workload (see LaunchRequest); an error is a launch
  // that could not begin (StartFailed), not a workload that failed.
  virtual Status launch(const LaunchRequest& request) = 0;
  // Everything observed up to `now`, oldest first.
  virtual std::vector<WorkloadEvent> observe(TimePoint now) = 0;
  // When observe next has something (TimePoint::min(): now; max(): nothing
  // foreseen). The agent sleeps no longer than this.
  virtual TimePoint next_event_at() const = 0;
  // The core no longer keeps any record of `key` (its copy was collected):
  // whatever the backend kept for it after it ended (work directories,
  // logs) may go.
  virtual void forget(const std::string& key) = 0;
  // Up to `max_bytes` of replica `replica`'s output from `offset` (< 0: the
  // last -offset bytes). NotFound when the backend keeps no output for it
  // (the sim backend never does).
  virtual Result<LogChunk> read_log(const std::string& key, int replica, int64_t offset,
                                    size_t max_bytes) const = 0;
  // What the backend can say about `key`'s work for `describe` (how limits
  // are enforced, where it runs); empty when nothing.
  virtual std::string describe(const std::string& key) const = 0;
  // Why `key`'s launched work has not started yet, as the backend last saw
  // it (an image that cannot be pulled, a config it cannot make); "" when
  // it says nothing. What a start timeout reports with its end.
  virtual std::string unstarted_reason(const std::string&) const { return ""; }

  // Ok while the backend can take new work; else why not (its manager
  // does not answer, say). The agent then refuses candidates with
  // BackendUnavailable and keeps serving everything else.
  virtual Status health() const { return Status::ok(); }
  // What an operator should know while the backend works on (objects of
  // its manager it cannot read and leaves out), one line each; empty
  // when nothing. `shoalctl status` shows them.
  virtual std::vector<std::string> warnings() const { return {}; }
  // What the backend's manager answered (a Kubernetes API server), for
  // /metrics; nullopt for a backend without one.
  virtual std::optional<ApiStats> api_stats() const { return std::nullopt; }
  // Work waiting in the backend's own queue that is not this agent's (a
  // shared Slurm's pending jobs of its local users): it competes for the
  // same room, so weighted routing's `queue` metric counts it.
  virtual int64_t backlog() const { return 0; }

  virtual CapacitySummary capacity() const = 0;
  // What a workload of `namespace_name` could get: capacity() capped by the
  // namespace's quota headroom.
  virtual CapacitySummary capacity_for(const std::string& namespace_name) const = 0;
  // The same, also capped by `queue`'s headroom (its deserved share when
  // borrowing is off); nullopt when the cluster has no such queue.
  virtual std::optional<CapacitySummary> capacity_for(const std::string& namespace_name,
                                                      const std::string& queue) const = 0;
  // Changes (grows) whenever capacity() or capacity_for() may answer
  // differently from before: a reader may keep answers it computed at one
  // version and reuse them while the version stays the same (the target's
  // CAPACITY pass, which would otherwise ask again for every namespace and
  // queue at every heartbeat).
  virtual uint64_t capacity_version() const = 0;
  // Both are read on every CAPACITY pass: references, not copies, valid
  // until the cluster changes.
  virtual const std::vector<std::string>& queue_names() const = 0;
  virtual const std::vector<NodeUsage>& nodes() const = 0;
};

}  // namespace shoal::cluster
