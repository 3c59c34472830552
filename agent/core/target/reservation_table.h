// The target's reservations: what each source has reserved, bound or run
// here, by (source id, uid), with what follows from them kept in step: what
// each source holds here (its invitation's limits are checked against it,
// and advertised room is capped by what they leave) and the routing counts
// of reserved, bound and running copies.
//
// Contract: a record is filed with file(); after any other change to an
// entry's record the role calls follow() (TargetRole::persist does, with
// the store write); an entry goes with erase(). Walks may change entries
// through entries(), never add or remove them.
//
// Invariant: each source's held is the sum of its entries that hold
// resources (store::holds_resources), and each entry is filed under its
// record's (source, uid).
#pragma once

#include <map>
#include <string>
#include <utility>

#include "agent/core/target/routing_counts.h"
#include "agent/core/views.h"
#include "common/text_key.h"
#include "common/time.h"
#include "store/store.h"

namespace shoal::core::target {

class ReservationTable {
 public:
  using Key = std::pair<std::string, std::string>;  // (source id, uid)
  struct Entry {
    store::ReservationRecord record;
    TimePoint last_status_sent{};
    uint64_t generation_sent = 0;  // of the last STATUS sent
    int status_resends = 0;        // of that generation (Context::resend_at)
    double ready_score = -1;       // what our READY said; repeated as it was (-1: not known)
  };
  using Entries = std::map<Key, Entry>;

  explicit ReservationTable(RoutingCounts& counts) : counts_(counts) {}

  // The phase a source reads (STATUS, HOLDINGS) for a reservation's.
  static model::Phase source_phase(store::ReservationPhase phase);

  Entries& entries() { return entries_; }
  const Entries& entries() const { return entries_; }
  Entry* find(const Key& key);
  // Files `entry` under `key` (replacing what was there) and follows it.
  Entry& file(const Key& key, Entry entry);
  // `record`, filed under its (source, uid), changed: held and the counts follow.
  void follow(const store::ReservationRecord& record);
  // Drops the entry under `key`, and what it held.
  void erase(const Key& key);

  // What `source` holds here. The row lives as long as the table (rows are
  // never erased), so a reference to it may be kept.
  const InvitationUsage& held_by(const std::string& source) { return held_[source]; }
  InvitationUsage usage_of(const std::string& source) const;
  // Calls `visit` on each entry of `source` (entries are ordered by
  // source, so only those are walked) until it returns true; returns
  // whether one did.
  template <typename Visit>
  bool any_of(const std::string& source, Visit visit) const {
    for (auto it = entries_.lower_bound({source, ""});
         it != entries_.end() && it->first.first == source; ++it) {
      if (visit(it->second.record)) return true;
    }
    return false;
  }
  // Whether `source` holds anything here (reserved, bound or running).
  bool holds_work_of(const std::string& source) const {
    return any_of(source, [](const store::ReservationRecord& record) {
      return store::holds_resources(record.phase);
    });
  }
  // Whether `source` has a bound or running copy here: what fencing stops.
  bool runs_work_of(const std::string& source) const {
    return any_of(source, [](const store::ReservationRecord& record) {
      return record.phase == store::ReservationPhase::kBound ||
             record.phase == store::ReservationPhase::kRunning;
    });
  }
  // Whether the routing counts moved since the last call (sources hear
  // of it at the next tick).
  bool take_counts_moved() { return std::exchange(counts_moved_, false); }

  std::string broken_invariant() const;

 private:
  void unaccount(const Key& key);

  RoutingCounts& counts_;
  Entries entries_;
  // What each source holds, kept as entries change rather than summed per
  // CANDIDATE: that sum over every reservation of the source was half a
  // busy target's CPU. Zero when it holds nothing; never erased.
  TextMap<InvitationUsage> held_;
  std::map<Key, model::Resources> counted_;  // what held counts, by key
  bool counts_moved_ = false;
};

}  // namespace shoal::core::target
