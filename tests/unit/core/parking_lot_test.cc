// The source's parking lot on its own: a parked workload leaves the awake
// set until its time, wakes a bounded herd per tick, and the invariant
// catches a workload parked behind the lot's back.
#include "agent/core/source/parking_lot.h"

#include <gtest/gtest.h>

namespace shoal::core::source {
namespace {

using namespace std::chrono_literals;

TimePoint at(int seconds) { return TimePoint{} + std::chrono::seconds(seconds); }

struct NoTimes : DueIndex::Times {
  std::optional<TimePoint> own_due(const std::string&, DueIndex::ResendBound) const override {
    return TimePoint::max();
  }
  const std::string* watched(const std::string&) const override { return nullptr; }
  TimePoint lost_at(const std::string&) const override { return TimePoint::max(); }
};

SourceWorkload pending(const std::string& uid, TimePoint next_round, TimePoint restart = {}) {
  SourceWorkload out;
  out.record.uid = uid;
  out.record.spec.namespace_name = "default";
  out.record.spec.name = uid;
  out.record.restart_at = restart;
  out.next_round_at = next_round;
  return out;
}

TEST(ParkingLotTest, AParkedWorkloadWakesAtTheLaterOfItsRoundAndItsRestart) {
  NoTimes times;
  DueIndex due(times);
  SourceBook book;
  ParkingLot lot(due);
  SourceWorkload& a = book.add(pending("a", at(10)));
  SourceWorkload& b = book.add(pending("b", at(5), at(20)));
  lot.park(a);
  lot.park(b);
  EXPECT_EQ(a.parked_until, at(10));
  EXPECT_EQ(b.parked_until, at(20)) << "its restart is later than its round";
  EXPECT_EQ(lot.next_wake(), at(10));
  EXPECT_EQ(lot.broken_invariant(book), "");

  lot.wake_due(book, at(9));
  EXPECT_EQ(lot.size(), 2u);
  lot.wake_due(book, at(10));
  EXPECT_EQ(a.parked_until, TimePoint{});
  EXPECT_TRUE(due.is_awake("a"));
  EXPECT_EQ(lot.next_wake(), at(20));

  lot.unpark(b);  // a message for it: awake at once
  EXPECT_TRUE(due.is_awake("b"));
  EXPECT_EQ(lot.size(), 0u);
  EXPECT_EQ(lot.next_wake(), TimePoint::max());
  EXPECT_EQ(lot.broken_invariant(book), "");
}

TEST(ParkingLotTest, OneTickWakesABoundedHerdAndTheRestStayDue) {
  NoTimes times;
  DueIndex due(times);
  SourceBook book;
  ParkingLot lot(due);
  int parked = ParkingLot::kMostWokenPerTick + 5;
  for (int i = 0; i < parked; ++i)
    lot.park(book.add(pending("w" + std::to_string(10000 + i), at(1))));
  lot.wake_due(book, at(1));
  EXPECT_EQ(lot.size(), 5u);
  EXPECT_EQ(lot.next_wake(), at(1)) << "the rest are due still";
  lot.wake_due(book, at(1));
  EXPECT_EQ(lot.size(), 0u);
}

TEST(ParkingLotTest, TheInvariantCatchesAWorkloadParkedBehindItsBack) {
  NoTimes times;
  DueIndex due(times);
  SourceBook book;
  ParkingLot lot(due);
  SourceWorkload& a = book.add(pending("a", at(10)));
  a.parked_until = at(10);
  EXPECT_NE(lot.broken_invariant(book), "");
  a.parked_until = TimePoint{};
  lot.park(a);
  a.parked_until = at(11);  // moved without the lot
  EXPECT_NE(lot.broken_invariant(book), "");
}

}  // namespace
}  // namespace shoal::core::source
