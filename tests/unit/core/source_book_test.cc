// The source's book of workloads on its own: names, a group's copies,
// counts kept as records change, pages, watches and its invariant.
#include "agent/core/source/book.h"

#include <gtest/gtest.h>

namespace shoal::core::source {
namespace {

SourceWorkload workload(const std::string& uid, const std::string& name,
                        model::Phase phase = model::Phase::kPending, const std::string& parent = "",
                        int32_t copy_index = 0) {
  SourceWorkload out;
  out.record.uid = uid;
  out.record.spec.namespace_name = "default";
  out.record.spec.name = name;
  out.record.phase = phase;
  out.record.parent = parent;
  out.record.copy_index = copy_index;
  return out;
}

TEST(SourceBookTest, AWorkloadIsFoundByUidAndNameAndCountedByPhase) {
  SourceBook book;
  book.add(workload("u1", "a"));
  book.add(workload("u2", "b", model::Phase::kRunning));
  EXPECT_EQ(book.find("u1")->record.spec.name, "a");
  EXPECT_EQ(book.find_named("default/b")->record.uid, "u2");
  EXPECT_EQ(book.find_named("default/none"), nullptr);
  WorkloadCounts counts = book.counts();
  EXPECT_EQ(counts.total, 2u);
  EXPECT_EQ(counts.by_phase[static_cast<size_t>(model::Phase::kPending)], 1u);
  EXPECT_EQ(book.broken_invariant(), "");

  SourceWorkload& a = *book.find("u1");
  a.record.phase = model::Phase::kSucceeded;
  a.record.started_at_ms = 5;
  EXPECT_NE(book.broken_invariant(), "") << "changed without saying so";
  book.changed(a);
  EXPECT_EQ(book.broken_invariant(), "");
  counts = book.counts();
  EXPECT_EQ(counts.by_phase[static_cast<size_t>(model::Phase::kSucceeded)], 1u);
  EXPECT_EQ(counts.started, 1u);

  book.erase("u1");
  EXPECT_EQ(book.find("u1"), nullptr);
  EXPECT_EQ(book.find_named("default/a"), nullptr);
  EXPECT_EQ(book.counts().total, 1u);
  EXPECT_EQ(book.broken_invariant(), "");
}

TEST(SourceBookTest, AGroupsCopiesAreListedInOrderAndNotCountedAsWorkloads) {
  SourceBook book;
  book.add(workload("g", "job"));
  book.add(workload("g-2", "job", model::Phase::kRunning, "g", 2));
  book.add(workload("g-1", "job", model::Phase::kRunning, "g", 1));
  EXPECT_EQ(book.copy_uids("g"), (std::vector<std::string>{"g-2", "g-1"}));
  auto copies = book.copies_of("g");
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].copy_index, 1);
  EXPECT_EQ(book.counts().total, 1u) << "only the group's own row";
  EXPECT_EQ(book.workloads().size(), 1u);
  book.erase("g-2");
  EXPECT_EQ(book.copy_uids("g"), (std::vector<std::string>{"g-1"}));
  EXPECT_EQ(book.broken_invariant(), "");
  book.erase("g");
  EXPECT_TRUE(book.copy_uids("g").empty()) << "the list goes with its group";
  EXPECT_NE(book.broken_invariant(), "") << "a copy left without its group's list";
}

TEST(SourceBookTest, APageResumesAfterItsKeyWithinItsNamespace) {
  SourceBook book;
  for (const char* name : {"a", "b", "c", "d"}) book.add(workload(std::string("u") + name, name));
  SourceWorkload other = workload("x", "a");
  other.record.spec.namespace_name = "other";
  book.add(std::move(other));
  WorkloadPage first = book.workloads_page("default", "", 3);
  ASSERT_EQ(first.items.size(), 3u);
  EXPECT_EQ(first.next, "default/c");
  WorkloadPage second = book.workloads_page("default", first.next, 3);
  ASSERT_EQ(second.items.size(), 1u);
  EXPECT_EQ(second.items[0].spec.name, "d");
  EXPECT_EQ(second.next, "");
  EXPECT_EQ(book.workloads_page("", "", 10).items.size(), 5u);
}

TEST(SourceBookTest, AWatchCollectsTheGroupOfAChangedCopyOnlyWhileOn) {
  SourceBook book;
  book.add(workload("g", "job"));
  SourceWorkload& copy = book.add(workload("g-1", "job", model::Phase::kRunning, "g", 1));
  book.changed(copy);
  EXPECT_TRUE(book.take_changes().empty()) << "nobody watches";
  book.watch_changes(true);
  book.changed(copy);
  auto changes = book.take_changes();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].uid, "g");
  EXPECT_TRUE(book.take_changes().empty()) << "taken once";
}

TEST(SourceBookTest, UsageAtATargetCountsItsUnfinishedWinnersOnly) {
  SourceBook book;
  SourceWorkload running = workload("u1", "a", model::Phase::kRunning);
  running.record.winner = "east";
  running.record.spec.resources = {2000, 1 << 20, 0};
  book.add(std::move(running));
  SourceWorkload done = workload("u2", "b", model::Phase::kSucceeded);
  done.record.winner = "east";
  book.add(std::move(done));
  InvitationUsage usage = book.usage_at("east");
  EXPECT_EQ(usage.workloads, 1);
  EXPECT_EQ(usage.resources.cpu_milli, 2000);
  EXPECT_EQ(book.usage_at("west").workloads, 0);
}

}  // namespace
}  // namespace shoal::core::source
