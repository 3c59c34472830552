#include "agent/core/source/book.h"

#include <algorithm>
#include <tuple>

namespace shoal::core::source {

SourceWorkload& SourceBook::add(SourceWorkload workload) {
  const store::WorkloadRecord& record = workload.record;
  if (record.parent.empty()) {
    uid_by_name_[record.spec.key()] = record.uid;
  } else {
    copies_[record.parent].push_back(record.uid);
  }
  std::string uid = record.uid;
  SourceWorkload& stored = entries_.insert_or_assign(uid, std::move(workload)).first->second;
  count(stored);
  return stored;
}

void SourceBook::erase(const std::string& uid) {
  auto it = entries_.find(uid);
  if (it == entries_.end()) return;
  const store::WorkloadRecord& record = it->second.record;
  if (record.parent.empty()) {
    uid_by_name_.erase(record.spec.key());
    copies_.erase(uid);
  } else if (auto copies = copies_.find(record.parent); copies != copies_.end()) {
    std::erase(copies->second, uid);
  }
  uncount(it->second);
  if (watched_changes_) watched_changes_->erase(uid);
  entries_.erase(it);
}

void SourceBook::changed(SourceWorkload& workload) {
  const store::WorkloadRecord& record = workload.record;
  if (watched_changes_) watched_changes_->insert(record.parent.empty() ? record.uid : record.parent);
  count(workload);
}

SourceWorkload* SourceBook::find(const std::string& uid) {
  auto it = entries_.find(uid);
  return it == entries_.end() ? nullptr : &it->second;
}

const SourceWorkload* SourceBook::find(const std::string& uid) const {
  auto it = entries_.find(uid);
  return it == entries_.end() ? nullptr : &it->second;
}

SourceWorkload* SourceBook::find_named(const std::string& key) {
  auto uid = uid_by_name_.find(key);
  return uid == uid_by_name_.end() ? nullptr : find(uid->second);
}

const std::vector<std::string>& SourceBook::copy_uids(const std::string& group_uid) const {
  static const std::vector<std::string> kNone;
  auto copies = copies_.find(group_uid);
  return copies == copies_.end() ? kNone : copies->second;
}

bool SourceBook::holds_quota(const store::WorkloadRecord& record) {
  bool group = record.parent.empty() && record.spec.placement.number_of_clusters > 1;
  return !group && (record.phase == model::Phase::kPlacing || record.phase == model::Phase::kBound ||
                    record.phase == model::Phase::kRunning);
}

model::QuotaUsage SourceBook::held_in(const std::string& namespace_name) const {
  auto it = held_.find(namespace_name);
  return it == held_.end() ? model::QuotaUsage{} : it->second;
}

void SourceBook::count(SourceWorkload& workload) {
  const store::WorkloadRecord& record = workload.record;
  uncount(workload);
  if (holds_quota(record)) {
    model::QuotaUsage& held = held_[record.spec.namespace_name];
    held.resources += record.spec.total();
    held.workloads += 1;
    workload.counted_in_quota = true;
  }
  if (!record.parent.empty()) return;
  ++count_by_phase_[static_cast<size_t>(record.phase)];
  workload.counted_phase = record.phase;
  workload.counted_started = record.started_at_ms != 0;
  count_started_ += workload.counted_started;
}

void SourceBook::uncount(SourceWorkload& workload) {
  if (workload.counted_in_quota) {
    auto it = held_.find(workload.record.spec.namespace_name);
    it->second.resources -= workload.record.spec.total();
    it->second.workloads -= 1;
    if (it->second.workloads == 0) held_.erase(it);
    workload.counted_in_quota = false;
  }
  if (!workload.counted_phase) return;
  --count_by_phase_[static_cast<size_t>(*workload.counted_phase)];
  count_started_ -= workload.counted_started;
  workload.counted_phase.reset();
  workload.counted_started = false;
}

std::vector<store::WorkloadRecord> SourceBook::workloads() const {
  std::vector<store::WorkloadRecord> out;
  for (const auto& [uid, workload] : entries_) {
    if (workload.record.parent.empty()) out.push_back(workload.record);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.spec.namespace_name, a.spec.name) <
           std::tie(b.spec.namespace_name, b.spec.name);
  });
  return out;
}

WorkloadPage SourceBook::workloads_page(const std::string& namespace_name,
                                        const std::string& after, size_t limit) const {
  WorkloadPage page;
  // uid_by_name_ is keyed "namespace/name" (WorkloadSpec::key): one
  // namespace's workloads are one run of keys, and a key resumes a listing
  // even if the workload it names is gone since.
  std::string prefix = namespace_name.empty() ? "" : namespace_name + "/";
  auto it = after.empty() ? uid_by_name_.lower_bound(prefix) : uid_by_name_.upper_bound(after);
  if (!after.empty() && after < prefix) it = uid_by_name_.lower_bound(prefix);
  for (; it != uid_by_name_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    if (page.items.size() == limit) {
      page.next = page.items.empty() ? "" : page.items.back().spec.key();
      break;
    }
    if (const SourceWorkload* found = find(it->second)) page.items.push_back(found->record);
  }
  return page;
}

std::vector<store::WorkloadRecord> SourceBook::copies_of(const std::string& uid) const {
  std::vector<store::WorkloadRecord> out;
  for (const auto& copy_uid : copy_uids(uid)) out.push_back(entries_.at(copy_uid).record);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.copy_index < b.copy_index; });
  return out;
}

std::optional<store::WorkloadRecord> SourceBook::find_workload(const std::string& namespace_name,
                                                               const std::string& name) const {
  auto uid = uid_by_name_.find(namespace_name + "/" + name);
  if (uid == uid_by_name_.end()) return std::nullopt;
  return entries_.at(uid->second).record;
}

WorkloadCounts SourceBook::counts() const {
  WorkloadCounts counts;
  counts.by_phase = count_by_phase_;
  for (size_t in_phase : count_by_phase_) counts.total += in_phase;
  counts.started = count_started_;
  return counts;
}

InvitationUsage SourceBook::usage_at(const std::string& target) const {
  InvitationUsage usage;
  for (const auto& [uid, workload] : entries_) {
    const store::WorkloadRecord& record = workload.record;
    if (record.winner != target || model::is_finished(record.phase)) continue;
    usage.resources += record.spec.total();
    usage.workloads += 1;
  }
  return usage;
}

void SourceBook::watch_changes(bool on) {
  if (!on) watched_changes_.reset();
  else if (!watched_changes_) watched_changes_.emplace();
}

std::vector<store::WorkloadRecord> SourceBook::take_changes() {
  std::vector<store::WorkloadRecord> out;
  if (!watched_changes_) return out;
  for (const std::string& uid : *watched_changes_) {
    if (const SourceWorkload* found = find(uid)) out.push_back(found->record);
  }
  watched_changes_->clear();
  return out;
}

std::string SourceBook::broken_invariant() const {
  std::array<size_t, std::size(model::kPhaseNames)> by_phase{};
  size_t started = 0, named = 0, copies = 0;
  std::map<std::string, model::QuotaUsage> held;
  for (const auto& [uid, workload] : entries_) {
    const store::WorkloadRecord& record = workload.record;
    if (uid != record.uid) return "a workload is filed under another uid";
    if (holds_quota(record)) {
      held[record.spec.namespace_name].resources += record.spec.total();
      held[record.spec.namespace_name].workloads += 1;
    }
    if (record.parent.empty()) {
      ++named;
      auto name = uid_by_name_.find(record.spec.key());
      if (name == uid_by_name_.end() || name->second != uid) return "a workload is not filed under its name";
      ++by_phase[static_cast<size_t>(record.phase)];
      started += record.started_at_ms != 0;
    } else {
      ++copies;
      const auto& siblings = copy_uids(record.parent);
      if (std::count(siblings.begin(), siblings.end(), uid) != 1) {
        return "a copy is not in its group's list exactly once";
      }
    }
  }
  if (named != uid_by_name_.size()) return "a name is filed for a workload that is gone";
  size_t listed = 0;
  for (const auto& [group, uids] : copies_) listed += uids.size();
  if (copies != listed) return "a group lists a copy that is gone";
  if (held != held_) return "what namespaces hold against their quotas differs from a recount";
  if (by_phase != count_by_phase_ || started != count_started_) {
    return "the kept counts differ from a recount";
  }
  return "";
}

std::set<std::string> SourceBook::sibling_winners(const store::WorkloadRecord& record) const {
  std::set<std::string> taken;
  if (record.parent.empty()) return taken;
  for (const auto& copy_uid : copy_uids(record.parent)) {
    const store::WorkloadRecord& sibling = find(copy_uid)->record;
    // A finished sibling keeps its cluster: the group promises N distinct
    // clusters for its whole life, not only among the copies still running.
    // (A copy that restarts elsewhere has cleared its winner.) So does an
    // epoch of it given up as lost, which may have succeeded unheard.
    if (copy_uid == record.uid) continue;
    if (!sibling.winner.empty()) taken.insert(sibling.winner);
    for (const auto& lost : sibling.lost_copies) taken.insert(lost.target);
  }
  return taken;
}

std::set<std::string> SourceBook::sibling_places(const store::WorkloadRecord& record) const {
  std::set<std::string> places = sibling_winners(record);
  if (record.parent.empty()) return places;
  for (const auto& copy_uid : copy_uids(record.parent)) {
    const SourceWorkload& sibling = *find(copy_uid);
    if (copy_uid != record.uid && !sibling.preferred.empty() && sibling.record.winner.empty() &&
        sibling.record.phase == model::Phase::kPlacing) {
      places.insert(sibling.preferred);
    }
  }
  return places;
}

}  // namespace shoal::core::source
