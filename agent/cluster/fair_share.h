// The local scheduler: queues with weights and deserved shares, namespace
// fair share by weighted dominant share (seed 004), resource quotas, gangs,
// node selectors and node order. A pure library over plain structs: it
// decides which pending work gets which nodes; the backend runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/cluster/schedule_queue.h"
#include "common/status.h"
#include "model/manifest.h"
#include "model/resources.h"
#include "model/workload.h"

namespace shoal::cluster {

struct ScheduleRequest {
  std::string key;  // unique per request
  model::WorkloadSpec spec;
};

struct WorkloadDecision {
  std::string key;
  bool admitted = false;           // at least its gang is placed
  std::vector<std::string> nodes;  // one per placed task
  std::string reason;              // why not (all of it) placed
};

struct NamespaceReport {
  std::string name;
  int64_t weight = 1;
  model::Resources allocated;
};

struct QueueReport {
  std::string name;
  int64_t weight = 1;
  model::Resources deserved;
  model::Resources allocated;
  std::vector<NamespaceReport> namespaces;  // every namespace with work in this queue
};

struct ScheduleResult {
  std::vector<QueueReport> queues;
  std::vector<WorkloadDecision> workloads;  // in request order
};

struct NamespaceQuota {
  std::optional<int64_t> cpu_milli, memory_bytes, gpu, workloads;
};

// A workload that holds room now, which preemption might stop.
struct RunningWork {
  std::string key;
  const model::WorkloadSpec* spec = nullptr;
  std::vector<std::string> nodes;  // one per replica, as held
  uint64_t started = 0;            // larger: started later
};

// What admitting one workload by preemption takes.
struct PreemptionPlan {
  std::vector<std::string> victims;  // keys of whole workloads, lowest priority first
  std::vector<std::string> nodes;    // where the workload goes once they are gone
  int32_t highest_priority = 0;      // the highest priority among the victims
};

class FairShareScheduler {
 public:
  // Refuses unknown quota keys and bad quantities, naming the field.
  static Result<FairShareScheduler> create(const model::ClusterSpec& spec);

  // One allocation pass over `pending` on the current node state, which it
  // updates. Never over-commits a node, never exceeds a quota, and without
  // borrowing never lets a queue exceed its deserved share.
  ScheduleResult allocate(const std::vector<ScheduleRequest>& pending);

  struct Served {
    std::string key;
    model::WorkloadSpec spec;        // what scheduling read of it (its name is not kept)
    std::vector<std::string> nodes;  // one per placed task
    std::string reason;              // why not all of it was placed ("" if it was)
  };
  // One allocation pass over `queue` (then one uncapped, with borrowing),
  // as allocate() does: what it admits leaves the queue and comes back here;
  // what waits keeps its place, its reason in queue.reason(). `whole`: every
  // replica or nothing (a reservation), whatever the gang size. Costs one try
  // per admitted workload and per group of alike work (schedule_queue.h).
  std::vector<Served> serve(ScheduleQueue& queue, bool whole);

  // Admits one workload now, all replicas or nothing (how a backend answers a
  // CANDIDATE). Returns node names, or the reason (e.g. QuotaExceeded:cpu).
  Result<std::vector<std::string>> admit(const std::string& key, const model::WorkloadSpec& spec);
  // Gives back what an admitted workload holds on `nodes` (one per task).
  void release(const model::WorkloadSpec& spec, const std::vector<std::string>& nodes);
  // Re-applies a workload known to hold `nodes` (after a restart); refuses
  // unknown nodes and anything that would over-commit one.
  Status restore(const model::WorkloadSpec& spec, const std::vector<std::string>& nodes);

  // The victims whose room would admit `spec` (every replica) now, under the
  // cluster's spec.preemption and the workload's preemptionPolicy, among
  // `running` that `may_stop` allows: within its queue, work of lower
  // priority; with reclaim, work of queues borrowing above their deserved
  // share while `spec`'s queue stays within its own. The set is minimal:
  // victims are added lowest priority first, the most recently started
  // first among equals, until `spec` fits; then each is spared again,
  // highest priority first, if `spec` fits without it. A victim is a whole
  // workload (a gang goes whole). nullopt when nothing would make room.
  // Changes nothing.
  std::optional<PreemptionPlan> plan_preemption(
      const model::WorkloadSpec& spec, const std::vector<RunningWork>& running,
      const std::function<bool(const RunningWork&)>& may_stop) const;

  // What namespace `namespace_name` may still use under its quotas.
  model::Resources quota_headroom(const std::string& namespace_name) const;
  // What queue `queue` may still take: its deserved share minus what it
  // holds, or unlimited with borrowing. nullopt for a queue that does not exist.
  std::optional<model::Resources> queue_headroom(const std::string& queue) const;
  const model::ClusterSpec& spec() const { return spec_; }

  // Room on each node (by index, as spec().nodes) that work outside this
  // scheduler holds — a shared backend's other users, or a whole node its
  // manager has down. Nothing is admitted into it; what is already held
  // stays (restore() ignores it: it re-applies what is known to run).
  void set_room_taken(std::vector<model::Resources> taken);
  // Adds a node the cluster gained while running (one that joined a
  // Kubernetes cluster), empty and last in node order; for a name it has
  // already, takes the node's labels and capacity in place of the old. The
  // caller never lowers a capacity (NodeCluster counts room a node lost as
  // room taken), so what is held stays within it.
  void put_node(const model::NodeSpec& node);

  int64_t namespace_weight(const std::string& namespace_name) const;
  const std::vector<model::Resources>& node_allocated() const { return allocated_; }

 private:
  explicit FairShareScheduler(const model::ClusterSpec& spec) : spec_(spec) {}
  // Queue `queue`'s deserved share: capacity x its weight / all weights.
  model::Resources deserved_share(const std::string& queue) const;
  model::Resources queue_allocated(const std::string& queue) const;
  // One serve(): its node order, where each group's walk stands, and what
  // it admitted so far (fair_share.cc).
  class ServePass;

  model::ClusterSpec spec_;
  model::Resources capacity_;
  std::vector<model::Resources> allocated_;  // per node
  std::vector<model::Resources> taken_;      // per node, by others (set_room_taken)
  std::map<std::string, int64_t> namespace_weights_;
  std::map<std::string, NamespaceQuota> quotas_;
  std::map<std::string, model::Resources> namespace_used_;   // quota accounting
  std::map<std::string, int64_t> namespace_workloads_;       // for count/workloads
  std::map<std::string, model::Resources> queue_allocated_;
  std::map<std::pair<std::string, std::string>, model::Resources> queue_namespace_allocated_;
  std::map<std::string, size_t> node_index_;
};

// Dominant share of `used` in `capacity`: the largest used/capacity fraction.
double dominant_share(const model::Resources& used, const model::Resources& capacity);

}  // namespace shoal::cluster
