// Work waiting for the local scheduler, kept in the order a fair-share pass
// serves it (FairShareScheduler::serve) as work arrives and leaves: O(log n)
// per change, never a re-sort of the whole queue.
//
// Alike work forms one group: the same queue, namespace, per-replica
// resources, replica count, gang size and node selector. Within one pass a
// group is tried from its first member (highest priority, then arrival);
// once a first step of a member is refused, every later member would be
// refused for the same reason, since a pass only fills nodes, quotas and
// shares. So a pass costs one try per admitted workload and per group, not
// one per queued workload: 100,000 queued jobs of a few shapes cost a few
// tries when the cluster is full.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/workload.h"

namespace shoal::cluster {

class FairShareScheduler;

class ScheduleQueue {
 public:
  ScheduleQueue() = default;
  ScheduleQueue(const ScheduleQueue&) = delete;
  ScheduleQueue& operator=(const ScheduleQueue&) = delete;
  ScheduleQueue(ScheduleQueue&&) = default;
  ScheduleQueue& operator=(ScheduleQueue&&) = default;

  // Queues `key` behind everything queued so far at its priority. `spec`'s
  // name is not kept (only what scheduling reads). False if `key` is
  // already queued: it keeps its place.
  bool push(const std::string& key, const model::WorkloadSpec& spec);
  // Removes `key`; false if it was not queued.
  bool erase(const std::string& key);
  bool contains(const std::string& key) const { return index_.contains(key); }
  size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }
  // Why `key` was not admitted by the last pass that tried its group ("" if
  // none has yet, or `key` is not queued).
  std::string_view reason(const std::string& key) const;
  // Workloads passes have tried to place, in all: what passes cost.
  uint64_t tries() const { return tries_; }
  // (queue, namespace) of everything queued, each once, sorted.
  std::vector<std::pair<std::string, std::string>> namespaces() const;

  // The bookkeeping agrees with itself (tests and simulations).
  bool check_invariants() const;

 private:
  friend class FairShareScheduler;

  // Priority first (highest), then arrival.
  using Rank = std::pair<int64_t, uint64_t>;  // (-priority, arrival)
  struct Namespace;
  using Members = std::set<std::pair<Rank, std::string>>;
  struct Group {
    model::WorkloadSpec shape;  // what every member shares (name cleared)
    Members members;
    Rank head;           // its entry in owner->heads: the first member's rank
    std::string reason;  // why its first step was refused at the last pass
    Namespace* owner = nullptr;
    std::string id;  // its key in groups_
  };
  struct Namespace {
    std::string queue;
    std::string name;
    // Each non-empty group by its first member: the namespace's next
    // workload is the first of the first group.
    std::set<std::pair<Rank, Group*>> heads;
    size_t groups = 0;
  };
  struct Place {
    Group* group;
    Rank rank;
  };

  static std::string group_id(const model::WorkloadSpec& spec);
  // Re-files `group` under its first member in its namespace's heads after
  // members came or went; drops it (and an emptied namespace) once empty.
  void refile(Group* group);

  std::map<std::string, std::unique_ptr<Group>> groups_;
  std::map<std::pair<std::string, std::string>, Namespace> namespaces_;
  std::unordered_map<std::string, Place> index_;
  uint64_t arrivals_ = 0;
  uint64_t tries_ = 0;
};

}  // namespace shoal::cluster
