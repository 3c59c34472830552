// The cluster backend interface: how the agent core reserves, starts and
// releases work on the cluster it runs beside. Implementations: sim (below);
// later exec and kubernetes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/cluster/fair_share.h"
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
};

struct CapacitySummary {
  model::Resources free;               // sum over nodes
  model::Resources largest_free_node;  // per resource, the most free on any one node
};

enum class WorkloadEventKind { kStarted, kSucceeded, kFailed };

struct WorkloadEvent {
  std::string key;
  WorkloadEventKind kind;
  TimePoint at;
  int32_t exit_code = 0;
  std::string message;
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
  // The local scheduler's queue (DESIGN.md §6). Work queued under `key`
  // waits, in the order the scheduler serves queues and namespaces, until a
  // pass of serve_queue() reserves it or it is withdrawn. False if `key` is
  // already queued (it keeps its place) or already holds a reservation.
  virtual bool enqueue(const std::string& key, const model::WorkloadSpec& spec) = 0;
  // Takes `key` out of the queue; a no-op for one not queued.
  virtual void withdraw(const std::string& key) = 0;
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
  // Re-establishes a reservation on the given nodes (after a restart).
  virtual Status restore(const std::string& key, const model::WorkloadSpec& spec,
                         const std::vector<std::string>& nodes) = 0;
  // Frees whatever `key` holds; a no-op for an unknown key.
  virtual void release(const std::string& key) = 0;
  // Starts the reserved workload `key` as of `started_at`.
  virtual Status start(const std::string& key, TimePoint started_at, Duration duration,
                       int32_t exit_code) = 0;
  // Everything that happened up to `now`, oldest first.
  virtual std::vector<WorkloadEvent> drain_events(TimePoint now) = 0;
  // When drain_events next has something (TimePoint::min(): now; max():
  // nothing foreseen). The agent sleeps no longer than this.
  virtual TimePoint next_event_at() const = 0;

  virtual CapacitySummary capacity() const = 0;
  // What a workload of `namespace_name` could get: capacity() capped by the
  // namespace's quota headroom.
  virtual CapacitySummary capacity_for(const std::string& namespace_name) const = 0;
  // The same, also capped by `queue`'s headroom (its deserved share when
  // borrowing is off); nullopt when the cluster has no such queue.
  virtual std::optional<CapacitySummary> capacity_for(const std::string& namespace_name,
                                                      const std::string& queue) const = 0;
  virtual std::vector<std::string> queue_names() const = 0;
  virtual std::vector<NodeUsage> nodes() const = 0;
};

}  // namespace shoal::cluster
