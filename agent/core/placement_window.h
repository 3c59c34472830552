// The source's placement window (placementWindow in agent.yaml): at most
// `size` workloads have a placement round in flight at once; the rest wait
// in line, highest priority first, then in the order they joined. A
// workload's place in line is its ticket (SourceWorkload::waiting_ticket,
// 0 when it is not in line), which only this class sets.
//
// Invariant: no more than `size` hold a slot; whoever is in line is in it
// exactly once, under its current priority and ticket, and holds no slot.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <tuple>

#include "agent/core/source_book.h"

namespace shoal::core {

class PlacementWindow {
 public:
  explicit PlacementWindow(int64_t size) : size_(size) {}

  int64_t size() const { return size_; }
  bool holds(const std::string& uid) const { return placing_.contains(uid); }
  // Whether `workload`, which holds no slot, must get in line rather than
  // start a round: no slot is free, or others are in line (they go first)
  // while the line is not being served (`serving_line`).
  bool must_wait(const SourceWorkload& workload, bool serving_line) const;
  // A round of `uid` is (or is no longer) in flight.
  void hold(const std::string& uid) { placing_.insert(uid); }
  void release(const std::string& uid) { placing_.erase(uid); }

  // In line behind those of its priority that are in line already.
  void join(SourceWorkload& workload);
  // Out of line, if it was in.
  void leave(SourceWorkload& workload);
  // Its priority becomes `priority`: in line again behind those already in
  // line at that priority, as a newcomer would be. Call before the record
  // takes the new priority.
  void reprioritize(SourceWorkload& workload, int32_t priority);
  // While a slot is free, the first in line, taken out of it; else null.
  SourceWorkload* admit_next(SourceBook& book);

  std::string broken_invariant(const SourceBook& book) const;

 private:
  using Place = std::tuple<int64_t, uint64_t, std::string>;  // (-priority, ticket, uid)
  static Place place_of(const SourceWorkload& workload) {
    return {-int64_t{workload.record.spec.priority}, workload.waiting_ticket, workload.record.uid};
  }

  int64_t size_;
  std::set<std::string> placing_;  // a round in flight (SourceRole::holds_slot)
  std::set<Place> line_;
  uint64_t next_ticket_ = 1;
};

}  // namespace shoal::core
