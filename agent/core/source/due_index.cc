#include "agent/core/source/due_index.h"

#include <algorithm>

namespace shoal::core::source {

void DueIndex::wake(const std::string& uid) {
  auto [found, added] = awake_.try_emplace(uid, Awake{TimePoint::min(), ""});
  if (added) {
    front_checked_ = false;
    awake_by_key_.emplace(TimePoint::min(), uid);
  } else {
    file_key(uid, found->second, TimePoint::min());
  }
}

void DueIndex::sleep(const std::string& uid) {
  auto found = awake_.find(uid);
  if (found == awake_.end()) return;
  front_checked_ = false;
  awake_by_key_.erase({found->second.key, uid});
  unwatch(uid, found->second.watched);
  awake_.erase(found);
}

void DueIndex::touch_watching(const std::string& winner) {
  auto watched = watched_by_winner_.find(winner);
  if (watched == watched_by_winner_.end()) return;
  touched_.insert(watched->second.begin(), watched->second.end());
}

void DueIndex::touch_all_watching() {
  for (const auto& [winner, uids] : watched_by_winner_) touched_.insert(uids.begin(), uids.end());
}

void DueIndex::start_tick() {
  for (const std::string& uid : touched_) {
    auto found = awake_.find(uid);
    if (found != awake_.end()) file_key(uid, found->second, TimePoint::min());
  }
  touched_.clear();
  touched_due_ = TimePoint::max();
}

DueIndex::Visits DueIndex::due(TimePoint now) const {
  Visits visits;
  for (auto it = awake_by_key_.begin(); it != awake_by_key_.end() && it->first <= now; ++it) {
    visits.uids.push_back(it->second);
  }
  visits.lost_check = next_lost_check_ <= now;
  if (visits.lost_check) {
    for (const auto& [winner, uids] : watched_by_winner_) {
      if (times_.lost_at(winner) <= now) visits.uids.insert(visits.uids.end(), uids.begin(), uids.end());
    }
  }
  std::sort(visits.uids.begin(), visits.uids.end());
  visits.uids.erase(std::unique(visits.uids.begin(), visits.uids.end()), visits.uids.end());
  return visits;
}

void DueIndex::finish_visits(const Visits& visits) {
  if (visits.lost_check) plan_lost_check();
}

void DueIndex::file_key(const std::string& uid, Awake& awake, TimePoint key) {
  if (awake.key == key) return;
  front_checked_ = false;
  awake_by_key_.erase({awake.key, uid});
  awake.key = key;
  awake_by_key_.emplace(key, uid);
}

void DueIndex::unwatch(const std::string& uid, const std::string& winner) {
  if (winner.empty()) return;
  auto watched = watched_by_winner_.find(winner);
  watched->second.erase(uid);
  if (watched->second.empty()) watched_by_winner_.erase(watched);
}

void DueIndex::refile(const std::string& uid) {
  auto found = awake_.find(uid);
  if (found == awake_.end()) return;
  Awake& awake = found->second;
  std::optional<TimePoint> own = times_.own_due(uid, ResendBound::kNow);
  if (!own) return;  // forgotten in this tick: dropped when next visited
  file_key(uid, awake, *own);
  const std::string* winner = times_.watched(uid);
  if (winner) next_lost_check_ = std::min(next_lost_check_, times_.lost_at(*winner));
  std::string_view watched = winner ? std::string_view(*winner) : std::string_view();
  if (awake.watched == watched) return;
  unwatch(uid, awake.watched);
  awake.watched = std::string(watched);
  if (!watched.empty()) watched_by_winner_[awake.watched].insert(uid);
}

TimePoint DueIndex::earliest_awake_due() {
  // Refile the front under its own due time until the front already is:
  // then every other key, no later than its own due time, is no earlier
  // than the front's, and the front's is the earliest.
  // Each workload is refiled at most once per search: one due "now" reads
  // the clock, and by the time it comes round to the front again the clock
  // has moved, so its key is again a little early. A search that refiled
  // it again would chase the clock through every workload due now until a
  // fixed due time came (seconds, under load). Its key from this search is
  // its due time as of this search: a lower bound, and tight enough.
  // Until the entries change, the front stays exact (or early, when its due
  // time moved later): most envelopes touch no workload, and the check
  // is a lookup.
  ++search_;
  while (!awake_by_key_.empty() && !front_checked_) {
    auto [key, uid] = *awake_by_key_.begin();
    Awake& front = awake_.at(uid);
    if (front.refiled_in_search == search_) break;
    std::optional<TimePoint> own = times_.own_due(uid, ResendBound::kNow);
    if (!own) break;  // forgotten in this tick: visited, then dropped
    if (key != TimePoint::min() && *own == key) break;
    front.refiled_in_search = search_;
    refile(uid);
    if (awake_by_key_.begin()->first == key && awake_by_key_.begin()->second == uid) break;
  }
  front_checked_ = true;
  return awake_by_key_.empty() ? TimePoint::max() : awake_by_key_.begin()->first;
}

void DueIndex::plan_lost_check() {
  next_lost_check_ = TimePoint::max();
  for (const auto& [winner, uids] : watched_by_winner_) {
    next_lost_check_ = std::min(next_lost_check_, times_.lost_at(winner));
  }
}

TimePoint DueIndex::next_deadline() {
  for (const std::string& uid : touched_) {
    if (awake_.count(uid)) {
      refile(uid);
      continue;
    }
    std::optional<TimePoint> own = times_.own_due(uid, ResendBound::kNow);
    if (!own) continue;
    TimePoint due = *own;
    if (const std::string* winner = times_.watched(uid)) due = std::min(due, times_.lost_at(*winner));
    touched_due_ = std::min(touched_due_, due);
  }
  touched_.clear();
  return std::min({earliest_awake_due(), next_lost_check_, touched_due_});
}

std::string DueIndex::broken_invariant(TimePoint deadline) const {
  if (awake_by_key_.size() != awake_.size()) return "awake_by_key_ does not file each awake workload once";
  size_t watched = 0;
  for (const auto& [winner, uids] : watched_by_winner_) watched += uids.size();
  for (const auto& [uid, awake] : awake_) {
    std::optional<TimePoint> own = times_.own_due(uid, ResendBound::kLatest);
    if (!own) return "an awake workload is not stored";
    if (!awake_by_key_.count({awake.key, uid})) return "awake_by_key_ does not file an awake workload under its key";
    const std::string* winner = times_.watched(uid);
    TimePoint due = winner ? std::min(*own, times_.lost_at(*winner)) : *own;
    if (due < deadline) return "next_deadline() is later than an awake workload's due time";
    if (*own < awake.key) return "an awake workload is filed under a key later than it is due";
    if ((winner ? *winner : std::string()) != awake.watched) {
      return "an awake workload is not filed under the winner it watches";
    }
    if (!awake.watched.empty()) {
      --watched;
      auto of_winner = watched_by_winner_.find(awake.watched);
      if (of_winner == watched_by_winner_.end() || !of_winner->second.count(uid)) {
        return "watched_by_winner_ does not file an awake workload under its winner";
      }
      if (times_.lost_at(awake.watched) < next_lost_check_) {
        return "next_lost_check_ is later than a watched winner's worker-lost time";
      }
    }
  }
  if (watched != 0) return "watched_by_winner_ files a workload that is not awake";
  return "";
}

}  // namespace shoal::core::source
