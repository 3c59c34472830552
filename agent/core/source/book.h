// The source role's workloads, by uid, with the indexes and counts kept as
// they change: by name (top-level workloads), a group's copies, the counts
// by phase that a status request reads, and the top-level workloads that
// changed while someone watches (`shoalctl get -w`).
//
// Invariant (broken_invariant): every top-level workload is filed under its
// name and every copy in its group's list, and nothing else is; the counts
// are what a recount finds. Entries are added and removed only through
// add() and erase(); the role changes what an entry holds and says so with
// changed().
#pragma once

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/core/source/workload.h"
#include "agent/core/views.h"

namespace shoal::core::source {

class SourceBook {
 public:
  using Entries = std::map<std::string, SourceWorkload>;  // by uid

  // Files a new workload (a top-level one under its name, a copy in its
  // group's list) and counts it. Its uid must be new.
  SourceWorkload& add(SourceWorkload workload);
  // Drops it from every index; a group's list of copies goes with it.
  void erase(const std::string& uid);
  // Its record changed: counted afresh and noted for watchers.
  void changed(SourceWorkload& workload);

  SourceWorkload* find(const std::string& uid);
  const SourceWorkload* find(const std::string& uid) const;
  // The top-level workload named `key` ("namespace/name"), or null.
  SourceWorkload* find_named(const std::string& key);
  // A group's copies by uid, in the order they were made (none: empty).
  const std::vector<std::string>& copy_uids(const std::string& group_uid) const;
  // Every entry, for walks that change what entries hold (never add or erase).
  Entries& entries() { return entries_; }
  const Entries& entries() const { return entries_; }

  // Views. Top-level workloads by namespace and name; at most `limit` (> 0)
  // after key `after` ("" from the start) in `namespace_name` ("" for all):
  // a page costs what it lists, not the total.
  std::vector<store::WorkloadRecord> workloads() const;
  WorkloadPage workloads_page(const std::string& namespace_name, const std::string& after,
                              size_t limit) const;
  std::vector<store::WorkloadRecord> copies_of(const std::string& uid) const;
  std::optional<store::WorkloadRecord> find_workload(const std::string& namespace_name,
                                                     const std::string& name) const;
  // The counts by phase and started (awake and parked are the role's).
  WorkloadCounts counts() const;
  // What `namespace_name`'s workloads hold against its federation-wide
  // quota: each from the start of a round until it ends (Placing, Bound,
  // Running), a group by its copies.
  model::QuotaUsage held_in(const std::string& namespace_name) const;
  static bool holds_quota(const store::WorkloadRecord& record);
  // Where the other copies of `record`'s group are placed or ran (their
  // winners, and the targets of epochs given up as lost); none for a
  // workload of no group.
  std::set<std::string> sibling_winners(const store::WorkloadRecord& record) const;
  // The same, and where those still placing are headed (their
  // first-ranked targets).
  std::set<std::string> sibling_places(const store::WorkloadRecord& record) const;
  // Our unfinished workloads placed at `target`: how many, and what they hold.
  InvitationUsage usage_at(const std::string& target) const;

  // While on, every top-level workload whose record changes is collected;
  // take_changes() returns them as they are now (a group for a change of
  // one of its copies) and starts collecting anew.
  void watch_changes(bool on);
  std::vector<store::WorkloadRecord> take_changes();

  std::string broken_invariant() const;

 private:
  void count(SourceWorkload& workload);
  void uncount(SourceWorkload& workload);

  Entries entries_;
  std::map<std::string, std::string> uid_by_name_;          // "ns/name" -> uid (top-level only)
  std::map<std::string, std::vector<std::string>> copies_;  // group uid -> copy uids
  std::array<size_t, std::size(model::kPhaseNames)> count_by_phase_{};
  std::map<std::string, model::QuotaUsage> held_;  // by namespace: what holds quota
  size_t count_started_ = 0;
  // Top-level workloads changed since take_changes() last ran, while someone
  // watches (nullopt: nobody does, and nothing is collected).
  std::optional<std::set<std::string>> watched_changes_;
};

}  // namespace shoal::core::source
