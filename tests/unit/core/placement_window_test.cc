// The source's placement window on its own: slots, the line's order
// (priority, then arrival), a priority change, and its invariant.
#include "agent/core/source/placement_window.h"

#include <gtest/gtest.h>

namespace shoal::core::source {
namespace {

SourceWorkload& add(SourceBook& book, const std::string& uid, int32_t priority) {
  SourceWorkload workload;
  workload.record.uid = uid;
  workload.record.spec.namespace_name = "default";
  workload.record.spec.name = uid;
  workload.record.spec.priority = priority;
  return book.add(std::move(workload));
}

std::vector<std::string> admit_all(PlacementWindow& window, SourceBook& book) {
  std::vector<std::string> out;
  while (SourceWorkload* next = window.admit_next(book)) {
    EXPECT_EQ(next->waiting_ticket, 0u);
    out.push_back(next->record.uid);
    window.hold(next->record.uid);
  }
  return out;
}

TEST(PlacementWindowTest, TheLineIsServedByPriorityThenArrivalWhileSlotsAreFree) {
  SourceBook book;
  PlacementWindow window(3);
  window.hold("running");
  add(book, "running", 0);
  for (auto [uid, priority] : {std::pair{"low", 0}, {"high", 10}, {"low2", 0}, {"high2", 10}}) {
    SourceWorkload& workload = add(book, uid, priority);
    EXPECT_TRUE(window.must_wait(workload, /*serving_line=*/false) || uid == std::string("low"));
    window.join(workload);
  }
  EXPECT_EQ(window.broken_invariant(book), "");
  EXPECT_EQ(admit_all(window, book), (std::vector<std::string>{"high", "high2"}));
  EXPECT_EQ(window.admit_next(book), nullptr) << "three slots, three held";
  window.release("high");
  EXPECT_EQ(admit_all(window, book), (std::vector<std::string>{"low"}));
  EXPECT_EQ(window.broken_invariant(book), "");
}

TEST(PlacementWindowTest, OthersInLineGoFirstUnlessTheLineIsBeingServed) {
  SourceBook book;
  PlacementWindow window(5);
  SourceWorkload& first = add(book, "first", 0);
  EXPECT_FALSE(window.must_wait(first, false)) << "free slots, nobody in line";
  window.join(first);
  SourceWorkload& newcomer = add(book, "newcomer", 0);
  EXPECT_TRUE(window.must_wait(newcomer, false));
  EXPECT_FALSE(window.must_wait(newcomer, true));
}

TEST(PlacementWindowTest, ANewPriorityQueuesBehindThoseAlreadyWaitingAtIt) {
  SourceBook book;
  PlacementWindow window(1);
  window.hold("busy");
  add(book, "busy", 0);
  SourceWorkload& waiting_high = add(book, "waiting-high", 5);
  window.join(waiting_high);
  SourceWorkload& raised = add(book, "raised", 0);
  window.join(raised);
  window.reprioritize(raised, 5);
  raised.record.spec.priority = 5;
  EXPECT_EQ(window.broken_invariant(book), "");
  window.release("busy");
  EXPECT_EQ(window.admit_next(book)->record.uid, "waiting-high");
}

TEST(PlacementWindowTest, ItsInvariantCatchesAStrayTicketAndADoubleSlot) {
  SourceBook book;
  PlacementWindow window(2);
  SourceWorkload& workload = add(book, "w", 0);
  window.join(workload);
  window.leave(workload);
  EXPECT_EQ(workload.waiting_ticket, 0u);
  EXPECT_EQ(window.broken_invariant(book), "");
  workload.waiting_ticket = 42;  // set behind the window's back
  EXPECT_NE(window.broken_invariant(book), "");
  workload.waiting_ticket = 0;
  window.join(workload);
  window.hold("w");
  EXPECT_NE(window.broken_invariant(book), "") << "in line and holding a slot";
  window.release("w");
  window.hold("gone");
  EXPECT_NE(window.broken_invariant(book), "") << "a slot held by a workload that is gone";
}

}  // namespace
}  // namespace shoal::core::source
