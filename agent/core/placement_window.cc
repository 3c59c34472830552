#include "agent/core/placement_window.h"

#include <climits>

namespace shoal::core {

bool PlacementWindow::must_wait(const SourceWorkload& workload, bool serving_line) const {
  return full() || (waits_in(kSlotLine) && workload.waiting_ticket == 0 && !serving_line);
}

std::set<PlacementWindow::Place>::const_iterator PlacementWindow::first_in(std::string_view line) const {
  auto it = line_.lower_bound(Place{std::string(line), INT64_MIN, 0, ""});
  return it != line_.end() && std::get<0>(*it) == line ? it : line_.end();
}

bool PlacementWindow::waits_in(std::string_view line) const { return first_in(line) != line_.end(); }

std::vector<std::string> PlacementWindow::quota_lines() const {
  std::vector<std::string> out;
  constexpr std::string_view kPrefix = "quota/";
  for (auto it = line_.lower_bound(Place{std::string(kPrefix), INT64_MIN, 0, ""});
       it != line_.end() && std::get<0>(*it).starts_with(kPrefix);) {
    const std::string& line = std::get<0>(*it);
    out.push_back(line.substr(kPrefix.size()));
    it = line_.lower_bound(Place{line + '\0', INT64_MIN, 0, ""});  // past this line
  }
  return out;
}

void PlacementWindow::join(SourceWorkload& workload, std::string_view line) {
  if (workload.waiting_ticket != 0) return;
  workload.waiting_ticket = next_ticket_++;
  workload.waiting_line = std::string(line);
  line_.insert(place_of(workload));
}

void PlacementWindow::leave(SourceWorkload& workload) {
  if (workload.waiting_ticket == 0) return;
  line_.erase(place_of(workload));
  workload.waiting_ticket = 0;
  workload.waiting_line.clear();
}

void PlacementWindow::reprioritize(SourceWorkload& workload, int32_t priority) {
  if (workload.waiting_ticket == 0) return;
  line_.erase(place_of(workload));
  workload.waiting_ticket = next_ticket_++;
  line_.insert({workload.waiting_line, -int64_t{priority}, workload.waiting_ticket, workload.record.uid});
}

SourceWorkload* PlacementWindow::take(SourceBook& book, std::set<Place>::const_iterator place) {
  std::string uid = std::get<3>(*place);
  line_.erase(place);
  SourceWorkload* workload = book.find(uid);
  if (workload) {
    workload->waiting_ticket = 0;
    workload->waiting_line.clear();
  }
  return workload;
}

SourceWorkload* PlacementWindow::admit_next(SourceBook& book) {
  auto first = first_in(kSlotLine);
  if (first == line_.end() || full()) return nullptr;
  return take(book, first);
}

SourceWorkload* PlacementWindow::admit_within_quota(
    SourceBook& book, const std::string& namespace_name,
    const std::function<bool(const SourceWorkload&)>& fits) {
  auto first = first_in(quota_line(namespace_name));
  if (first == line_.end() || full()) return nullptr;
  const SourceWorkload* head = book.find(std::get<3>(*first));
  if (head && !fits(*head)) return nullptr;
  return take(book, first);
}

std::string PlacementWindow::broken_invariant(const SourceBook& book) const {
  if (static_cast<int64_t>(placing_.size()) > size_) return "more rounds in flight than placementWindow";
  for (const auto& uid : placing_) {
    if (!book.find(uid)) return "the window's slot holder is a workload that is gone";
  }
  for (const Place& place : line_) {
    const SourceWorkload* found = book.find(std::get<3>(place));
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
