// Which of the source role's workloads its timers must visit, and when.
//
// A source holds tens of thousands of workloads; most have nothing to do
// until something happens to them. The index keeps the ones that do (the
// awake) filed by a key no later than their own due time, and, for those
// whose winner runs the copy remotely, under that winner, so a tick visits
// only what has come due and next_deadline() costs a lookup, not a walk.
//
// Contract with the owner (DueIndex::Times):
//  - an awake workload's key is no later than its own due time; a due time
//    moves earlier only through touch() (or a flow-control hold ending,
//    which brings it no earlier than its latest bound, ResendBound::kLatest);
//  - all workloads watching one winner are visited once that winner's
//    worker-lost time has come, and the planned lost check is no later than
//    any watched winner's;
//  - next_deadline() is a lower bound of every awake workload's due time and
//    of every touched one's: a tick may come early, never late.
// broken_invariant() checks all of it against the owner's due times.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/time.h"

namespace shoal::core::source {

class DueIndex {
 public:
  // kLatest: every resend as late as flow control may have held it. A
  // peer's acknowledgement can end a hold and move a resend earlier
  // without touching the workload, so a key computed before it is a lower
  // bound of that, not of the current due time; the checks use kLatest.
  enum class ResendBound { kNow, kLatest };

  // What the index asks of its owner for a workload by uid.
  class Times {
   public:
    virtual ~Times() = default;
    // When the workload next has something to do other than worker-lost
    // handling; nullopt if there is no such workload (forgotten).
    virtual std::optional<TimePoint> own_due(const std::string& uid, ResendBound bound) const = 0;
    // The remote winner whose silence it waits on, or null.
    virtual const std::string* watched(const std::string& uid) const = 0;
    // When the copies this winner runs may be called lost.
    virtual TimePoint lost_at(const std::string& winner) const = 0;
  };

  explicit DueIndex(const Times& times) : times_(times) {}
  DueIndex(const DueIndex&) = delete;
  DueIndex& operator=(const DueIndex&) = delete;

  // Awake from now on, visited by the next tick whatever its due time.
  void wake(const std::string& uid);
  // Quiet: no longer visited until woken.
  void sleep(const std::string& uid);
  bool is_awake(const std::string& uid) const { return awake_.count(uid) != 0; }
  size_t awake_count() const { return awake_.size(); }

  // Something happened to the workload that may bring its due time
  // earlier: computed afresh by the next next_deadline(), and visited by
  // the next tick if awake.
  void touch(const std::string& uid) { touched_.insert(uid); }
  // The same for every awake workload that watches `winner` (what the
  // owner knows of that peer changed), or every winner.
  void touch_watching(const std::string& winner);
  void touch_all_watching();

  // A tick begins: what was touched since next_deadline() last read it is
  // due now for all we know, and is visited by this tick.
  void start_tick();
  // What the tick visits at `now`: the awake whose key has come, and, once
  // a watched winner's worker-lost time has come, all that watch it; in uid
  // order, each once.
  struct Visits {
    std::vector<std::string> uids;
    bool lost_check = false;  // finish_visits() plans the next one
  };
  Visits due(TimePoint now) const;
  // After a visit: files the workload under its own due time and winner
  // again (it stays awake).
  void refile(const std::string& uid);
  void finish_visits(const Visits& visits);

  // The earliest time a tick has something to do for the workloads here.
  TimePoint next_deadline();

  // "" while the contract above holds, else what broke. `deadline`: what
  // next_deadline() returned last, with nothing touched since.
  std::string broken_invariant(TimePoint deadline) const;

 private:
  struct Awake {
    TimePoint key;
    std::string watched;  // winner, or ""
    uint64_t refiled_in_search = 0;  // earliest_awake_due's search_, when it refiled this one
  };
  void file_key(const std::string& uid, Awake& awake, TimePoint key);
  // Drops uid from the workloads `winner` is watched for ("": none).
  void unwatch(const std::string& uid, const std::string& winner);
  // The earliest own due time of the awake: the front key, once the front
  // is refiled under its own due time (and so all keys no later than theirs).
  TimePoint earliest_awake_due();
  void plan_lost_check();

  const Times& times_;
  std::map<std::string, Awake> awake_;  // by uid
  std::set<std::pair<TimePoint, std::string>> awake_by_key_;
  std::map<std::string, std::set<std::string>> watched_by_winner_;
  TimePoint next_lost_check_ = TimePoint::max();
  // Whether the front of awake_by_key_ was refiled under its own due time
  // since the entries last changed (earliest_awake_due).
  bool front_checked_ = false;
  uint64_t search_ = 0;  // earliest_awake_due's searches so far
  // Touched since the last tick. next_deadline() refiles the awake ones and
  // folds the due times of the others into touched_due_ (a loop iteration
  // asks once per batch, and 20,000 submitted at once were walked on every
  // ask until the next tick). A fold may keep a time that a later change
  // moved on: the tick then comes early, which is harmless.
  std::set<std::string> touched_;
  TimePoint touched_due_ = TimePoint::max();
};

}  // namespace shoal::core::source
