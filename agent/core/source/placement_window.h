// The source's admission lines. The placement window (placementWindow in
// agent.yaml): at most `size` workloads have a placement round in flight at
// once; the rest wait in the slot line. And one line per namespace whose
// federation-wide quota is used up: its work waits there, sent nowhere,
// until what the namespace holds leaves room. In every line the highest
// priority goes first, then the order they joined. A workload's place is
// its ticket and line (SourceWorkload::waiting_ticket, 0 when in none, and
// waiting_line), which only this class sets.
//
// Invariant: no more than `size` hold a slot; whoever waits is in exactly
// one line once, under its current priority and ticket, and holds no slot.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "agent/core/source/book.h"

namespace shoal::core::source {

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

  // Lines are named: kSlotLine for a slot, quota_line(namespace) for a
  // namespace's quota.
  static constexpr std::string_view kSlotLine = "";
  static const std::string& quota_line(const std::string& namespace_name) { return namespace_name; }
  // Whether the window has no free slot.
  bool full() const { return static_cast<int64_t>(placing_.size()) >= size_; }
  // Whether anyone waits in `line`.
  bool waits_in(std::string_view line) const;
  // How many wait in `line`.
  size_t waiting_in(std::string_view line) const;
  // The namespaces whose quota lines someone waits in.
  std::vector<std::string> quota_lines() const;

  // In `line` behind those of its priority that are in it already.
  void join(SourceWorkload& workload, std::string_view line = kSlotLine);
  // Out of line, if it was in.
  void leave(SourceWorkload& workload);
  // Its priority becomes `priority`: in line again behind those already in
  // line at that priority, as a newcomer would be. Call before the record
  // takes the new priority.
  void reprioritize(SourceWorkload& workload, int32_t priority);
  // While a slot is free, the first in the slot line, taken out of it; else null.
  SourceWorkload* admit_next(SourceBook& book);
  // While a slot is free, the first in `namespace_name`'s quota line if
  // `fits` it, taken out of it; else null.
  SourceWorkload* admit_within_quota(SourceBook& book, const std::string& namespace_name,
                                     const std::function<bool(const SourceWorkload&)>& fits);

  std::string broken_invariant(const SourceBook& book) const;

 private:
  using Place = std::tuple<int64_t, uint64_t, std::string>;  // (-priority, ticket, uid)
  using Line = std::set<Place>;
  static Place place_of(const SourceWorkload& workload) {
    return {-int64_t{workload.record.spec.priority}, workload.waiting_ticket, workload.record.uid};
  }
  // The line `workload` waits in (it must wait in one), or null when it is gone.
  Line* line_of(const SourceWorkload& workload);
  SourceWorkload* take(SourceBook& book, Line& line);

  int64_t size_;
  std::set<std::string> placing_;  // a round in flight (SourceRole::holds_slot)
  Line line_;                      // for a slot
  std::map<std::string, Line> quota_lines_;  // by namespace; none empty
  uint64_t next_ticket_ = 1;
};

}  // namespace shoal::core::source
