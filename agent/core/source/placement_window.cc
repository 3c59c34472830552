#include "agent/core/source/placement_window.h"


namespace shoal::core::source {

bool PlacementWindow::must_wait(const SourceWorkload& workload, bool serving_line) const {
  return full() || (!line_.empty() && workload.waiting_ticket == 0 && !serving_line);
}

bool PlacementWindow::waits_in(std::string_view line) const {
  return line.empty() ? !line_.empty() : quota_lines_.contains(std::string(line));
}

size_t PlacementWindow::waiting_in(std::string_view line) const {
  if (line.empty()) return line_.size();
  auto it = quota_lines_.find(std::string(line));
  return it == quota_lines_.end() ? 0 : it->second.size();
}

std::vector<std::string> PlacementWindow::quota_lines() const {
  std::vector<std::string> out;
  out.reserve(quota_lines_.size());
  for (const auto& [name, line] : quota_lines_) out.push_back(name);
  return out;
}

PlacementWindow::Line* PlacementWindow::line_of(const SourceWorkload& workload) {
  if (workload.waiting_line.empty()) return &line_;
  auto it = quota_lines_.find(workload.waiting_line);
  return it == quota_lines_.end() ? nullptr : &it->second;
}

void PlacementWindow::join(SourceWorkload& workload, std::string_view line) {
  if (workload.waiting_ticket != 0) return;
  workload.waiting_ticket = next_ticket_++;
  workload.waiting_line = std::string(line);
  (line.empty() ? line_ : quota_lines_[workload.waiting_line]).insert(place_of(workload));
}

void PlacementWindow::leave(SourceWorkload& workload) {
  if (workload.waiting_ticket == 0) return;
  if (Line* line = line_of(workload)) {
    line->erase(place_of(workload));
    if (line->empty() && line != &line_) quota_lines_.erase(workload.waiting_line);
  }
  workload.waiting_ticket = 0;
  workload.waiting_line.clear();
}

void PlacementWindow::reprioritize(SourceWorkload& workload, int32_t priority) {
  if (workload.waiting_ticket == 0) return;
  Line* line = line_of(workload);
  if (!line) return;
  line->erase(place_of(workload));
  workload.waiting_ticket = next_ticket_++;
  line->insert({-int64_t{priority}, workload.waiting_ticket, workload.record.uid});
}

SourceWorkload* PlacementWindow::take(SourceBook& book, Line& line) {
  std::string uid = std::get<2>(*line.begin());
  line.erase(line.begin());
  SourceWorkload* workload = book.find(uid);
  if (workload) {
    workload->waiting_ticket = 0;
    workload->waiting_line.clear();
  }
  return workload;
}

SourceWorkload* PlacementWindow::admit_next(SourceBook& book) {
  if (line_.empty() || full()) return nullptr;
  return take(book, line_);
}

SourceWorkload* PlacementWindow::admit_within_quota(
    SourceBook& book, const std::string& namespace_name,
    const std::function<bool(const SourceWorkload&)>& fits) {
  auto it = quota_lines_.find(namespace_name);
  if (it == quota_lines_.end() || full()) return nullptr;
  const SourceWorkload* head = book.find(std::get<2>(*it->second.begin()));
  if (head && !fits(*head)) return nullptr;
  SourceWorkload* taken = take(book, it->second);
  if (it->second.empty()) quota_lines_.erase(it);
  return taken;
}

std::string PlacementWindow::broken_invariant(const SourceBook& book) const {
  if (static_cast<int64_t>(placing_.size()) > size_) return "more rounds in flight than placementWindow";
  for (const auto& uid : placing_) {
    if (!book.find(uid)) return "the window's slot holder is a workload that is gone";
  }
  size_t waiting = 0;
  auto check_line = [&](const Line& line, const std::string& name) -> std::string {
    if (line.empty() && !name.empty()) return "an empty quota line is kept";
    for (const Place& place : line) {
      const SourceWorkload* found = book.find(std::get<2>(place));
      if (!found || place_of(*found) != place || found->waiting_line != name) {
        return "a line names a workload that is gone or holds another place";
      }
      if (placing_.contains(found->record.uid)) return "a workload in line also holds a slot";
      ++waiting;
    }
    return "";
  };
  if (std::string broken = check_line(line_, ""); !broken.empty()) return broken;
  for (const auto& [name, line] : quota_lines_) {
    if (std::string broken = check_line(line, name); !broken.empty()) return broken;
  }
  size_t tickets = 0;
  for (const auto& [uid, workload] : book.entries()) tickets += workload.waiting_ticket != 0;
  if (tickets != waiting) return "a workload with a ticket is not in its line";
  return "";
}

}  // namespace shoal::core::source
