// The counts a target advertises for weighted routing (CAPACITY): its
// copies bound or running and what they hold, and the candidates waiting
// in its queue, per namespace, per (namespace, queue) and cluster-wide —
// kept as work binds, ends and queues, never summed on demand.
//
// Invariant (broken_invariant): no count is below zero, the cluster-wide
// counts are the namespaces' sum, and each namespace's queues hold its
// workloads and queued candidates between them.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "model/placement_spec.h"
#include "model/resources.h"
#include "store/records.h"

namespace shoal::core::target {

class RoutingCounts {
 public:
  using Key = std::pair<std::string, std::string>;  // (source id, uid)

  // The reservation's phase changed: counted while bound or running.
  // Returns whether a count moved.
  bool follow(const store::ReservationRecord& record);
  // The reservation `key` is gone.
  bool forget(const Key& key);
  // A candidate joins (+1) or leaves (-1) the cluster's queue.
  void queued(const std::string& namespace_name, const std::string& queue, int64_t sign);

  const std::map<std::string, model::UsageCounts>& by_namespace() const { return by_namespace_; }
  const model::UsageCounts& cluster() const { return cluster_; }
  // Workloads and queued candidates of each queue of `namespace_name`.
  std::map<std::string, int64_t> queues_of(const std::string& namespace_name) const;
  int64_t in_queue(const std::string& namespace_name, const std::string& queue) const;
  // Candidates waiting in the cluster's queue, per (namespace, queue).
  std::map<Key, int64_t> queue_depths() const;
  // Bumped at every change: what was computed from the counts at one
  // version holds while it stays.
  uint64_t version() const { return version_; }

  std::string broken_invariant() const;

 private:
  struct Usage {
    std::string namespace_name;
    std::string queue;
    model::Resources total;
  };
  void count(const Usage& usage, int64_t sign, bool queued);

  std::map<std::string, model::UsageCounts> by_namespace_;
  model::UsageCounts cluster_;
  std::map<Key, int64_t> by_queue_;      // workloads and queued, per (namespace, queue)
  std::map<Key, int64_t> queued_by_queue_;  // queued only
  std::map<Key, Usage> in_use_;          // what is counted as bound or running, by reservation
  uint64_t version_ = 0;
};

}  // namespace shoal::core::target
