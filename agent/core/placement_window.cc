#include "agent/core/placement_window.h"

namespace shoal::core {

bool PlacementWindow::must_wait(const SourceWorkload& workload, bool serving_line) const {
  return static_cast<int64_t>(placing_.size()) >= size_ ||
         (!line_.empty() && workload.waiting_ticket == 0 && !serving_line);
}

void PlacementWindow::join(SourceWorkload& workload) {
  if (workload.waiting_ticket != 0) return;
  workload.waiting_ticket = next_ticket_++;
  line_.insert(place_of(workload));
}

void PlacementWindow::leave(SourceWorkload& workload) {
  if (workload.waiting_ticket == 0) return;
  line_.erase(place_of(workload));
  workload.waiting_ticket = 0;
}

void PlacementWindow::reprioritize(SourceWorkload& workload, int32_t priority) {
  if (workload.waiting_ticket == 0) return;
  line_.erase(place_of(workload));
  workload.waiting_ticket = next_ticket_++;
  line_.insert({-int64_t{priority}, workload.waiting_ticket, workload.record.uid});
}

SourceWorkload* PlacementWindow::admit_next(SourceBook& book) {
  if (line_.empty() || static_cast<int64_t>(placing_.size()) >= size_) return nullptr;
  std::string uid = std::get<2>(*line_.begin());
  line_.erase(line_.begin());
  SourceWorkload* workload = book.find(uid);
  if (workload) workload->waiting_ticket = 0;
  return workload;
}

std::string PlacementWindow::broken_invariant(const SourceBook& book) const {
  if (static_cast<int64_t>(placing_.size()) > size_) return "more rounds in flight than placementWindow";
  for (const auto& uid : placing_) {
    if (!book.find(uid)) return "the window's slot holder is a workload that is gone";
  }
  for (const Place& place : line_) {
    const SourceWorkload* found = book.find(std::get<2>(place));
    if (!found || place_of(*found) != place) {
      return "the line names a workload that is gone or holds another place";
    }
    if (placing_.contains(found->record.uid)) return "a workload in line also holds a slot";
  }
  for (const auto& [uid, workload] : book.entries()) {
    if (workload.waiting_ticket != 0 && !line_.contains(place_of(workload))) {
      return "a workload with a ticket is not in line";
    }
  }
  return "";
}

}  // namespace shoal::core
