// The source's due-time index on its own: what a tick visits, what
// next_deadline() promises, and the invariant check catching an owner whose
// due time moved earlier without a touch.
#include "agent/core/source/due_index.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace shoal::core::source {
namespace {

using namespace std::chrono_literals;

TimePoint at(int seconds) { return TimePoint{} + std::chrono::seconds(seconds); }

// Due times by uid, and the worker-lost time of each winner, set by the test.
struct Owner : DueIndex::Times {
  std::map<std::string, TimePoint> own;
  std::map<std::string, std::string> winner_of;
  std::map<std::string, TimePoint> lost;
  std::optional<TimePoint> own_due(const std::string& uid, DueIndex::ResendBound) const override {
    auto found = own.find(uid);
    if (found == own.end()) return std::nullopt;
    return found->second;
  }
  const std::string* watched(const std::string& uid) const override {
    auto found = winner_of.find(uid);
    return found == winner_of.end() ? nullptr : &found->second;
  }
  TimePoint lost_at(const std::string& winner) const override { return lost.at(winner); }
};

TEST(DueIndexTest, AWokenWorkloadIsVisitedByTheNextTickThenOnlyWhenItsTimeComes) {
  Owner owner;
  DueIndex index(owner);
  owner.own["a"] = at(10);
  owner.own["b"] = at(5);
  index.wake("a");
  index.wake("b");
  EXPECT_EQ(index.next_deadline(), at(5)) << "refiled under their own due times";
  EXPECT_EQ(index.broken_invariant(at(5)), "");

  index.start_tick();
  EXPECT_TRUE(index.due(at(4)).uids.empty());
  EXPECT_EQ(index.due(at(5)).uids, (std::vector<std::string>{"b"}));
  EXPECT_EQ(index.due(at(10)).uids, (std::vector<std::string>{"a", "b"}));

  index.wake("a");  // woken again: due at once, whatever its time
  EXPECT_EQ(index.due(at(0)).uids, (std::vector<std::string>{"a"}));
  index.sleep("b");
  EXPECT_FALSE(index.is_awake("b"));
  EXPECT_EQ(index.awake_count(), 1u);
}

// An owner whose workloads are due "now" by the clock it reads, and whose
// clock moves on with every question, as a real one does while thousands
// are asked about: each answer is a little later than the key it was
// filed under a moment ago.
struct DueNowOwner : DueIndex::Times {
  mutable TimePoint clock = at(0);
  mutable int asked = 0;
  int frozen_after = 0;  // the clock stops here, so a search that chases it ends
  std::set<std::string> due_now;
  TimePoint later = at(30);  // the one workload with a fixed time
  std::optional<TimePoint> own_due(const std::string& uid, DueIndex::ResendBound) const override {
    if (++asked < frozen_after) clock += 1ms;
    return due_now.count(uid) ? clock : later;
  }
  const std::string* watched(const std::string&) const override { return nullptr; }
  TimePoint lost_at(const std::string&) const override { return TimePoint::max(); }
};

TEST(DueIndexTest, WorkloadsDueNowByAMovingClockCostOneLookupEachNotAChaseOfTheClock) {
  DueNowOwner owner;
  DueIndex index(owner);
  constexpr int kDueNow = 500;
  owner.frozen_after = 100 * kDueNow;
  for (int i = 0; i < kDueNow; ++i) {
    std::string uid = "now-" + std::to_string(i);
    owner.due_now.insert(uid);
    index.wake(uid);
  }
  index.wake("fixed");
  TimePoint deadline = index.next_deadline();
  EXPECT_LE(owner.asked, 3 * (kDueNow + 1)) << "each workload is refiled at most once per question";
  EXPECT_LT(deadline, owner.later) << "the workloads due now make the deadline now";
  EXPECT_EQ(index.broken_invariant(deadline), "");
}

TEST(DueIndexTest, ATouchedWorkloadIsFiledAfreshSoItsEarlierTimeIsNotMissed) {
  Owner owner;
  DueIndex index(owner);
  owner.own["a"] = at(10);
  index.wake("a");
  EXPECT_EQ(index.next_deadline(), at(10));
  owner.own["a"] = at(3);
  EXPECT_NE(index.broken_invariant(at(10)), "") << "moved earlier without a touch";
  index.touch("a");
  EXPECT_EQ(index.next_deadline(), at(3));
  EXPECT_EQ(index.broken_invariant(at(3)), "");

  // A sleeping one that is touched still bounds the deadline until the tick.
  owner.own["quiet"] = at(2);
  index.touch("quiet");
  EXPECT_EQ(index.next_deadline(), at(2));
  index.start_tick();
  EXPECT_EQ(index.next_deadline(), at(3));
}

TEST(DueIndexTest, EveryWorkloadWatchingAWinnerIsVisitedOnceItMayBeCalledLost) {
  Owner owner;
  DueIndex index(owner);
  for (const char* uid : {"a", "b"}) {
    owner.own[uid] = TimePoint::max();
    owner.winner_of[uid] = "east";
    index.wake(uid);
  }
  owner.lost["east"] = at(20);
  index.start_tick();
  DueIndex::Visits first = index.due(at(0));
  ASSERT_EQ(first.uids.size(), 2u) << "woken: visited once";
  for (const auto& uid : first.uids) index.refile(uid);
  index.finish_visits(first);
  EXPECT_EQ(index.next_deadline(), at(20));
  EXPECT_EQ(index.broken_invariant(at(20)), "");
  EXPECT_TRUE(index.due(at(19)).uids.empty());

  DueIndex::Visits lost = index.due(at(20));
  EXPECT_TRUE(lost.lost_check);
  EXPECT_EQ(lost.uids, (std::vector<std::string>{"a", "b"}));
  // East was heard from: its lost time moves later; the plan follows.
  owner.lost["east"] = at(40);
  index.finish_visits(lost);
  EXPECT_EQ(index.next_deadline(), at(40));

  // Hearing nothing new of anyone but east's silence restarting earlier:
  // only a touch makes the index read it.
  owner.lost["east"] = at(30);
  EXPECT_NE(index.broken_invariant(at(40)), "");
  index.touch_watching("east");
  EXPECT_EQ(index.next_deadline(), at(30));
  EXPECT_EQ(index.broken_invariant(at(30)), "");
}

TEST(DueIndexTest, AWorkloadThatStopsWatchingIsNoLongerVisitedForThatWinner) {
  Owner owner;
  DueIndex index(owner);
  owner.own["a"] = TimePoint::max();
  owner.winner_of["a"] = "east";
  owner.lost["east"] = at(20);
  index.wake("a");
  EXPECT_EQ(index.next_deadline(), at(20));
  owner.winner_of.erase("a");  // finished: nothing to watch
  index.touch("a");
  index.start_tick();
  DueIndex::Visits visits = index.due(at(0));
  for (const auto& uid : visits.uids) index.refile(uid);
  index.finish_visits(visits);
  EXPECT_EQ(index.broken_invariant(index.next_deadline()), "");
  DueIndex::Visits later = index.due(at(25));
  EXPECT_TRUE(later.uids.empty());
  index.finish_visits(later);
  EXPECT_EQ(index.next_deadline(), TimePoint::max()) << "no winner watched: no lost check planned";
}

TEST(DueIndexTest, AForgottenWorkloadDoesNotStopTheIndex) {
  Owner owner;
  DueIndex index(owner);
  owner.own["gone"] = at(1);
  owner.own["kept"] = at(5);
  index.wake("gone");
  index.wake("kept");
  owner.own.erase("gone");  // forgotten within the tick that visits it
  EXPECT_NE(index.broken_invariant(TimePoint::min()), "");
  index.sleep("gone");
  EXPECT_EQ(index.next_deadline(), at(5));
  EXPECT_EQ(index.broken_invariant(at(5)), "");
}

}  // namespace
}  // namespace shoal::core::source
