// `shoalctl delete workload`: remote copies are stopped, reservations
// released, and the source forgets the workload only once that is confirmed.
#include <gtest/gtest.h>

#include "tests/unit/core/world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

int64_t free_cpu(Node& node) { return node.cluster->capacity().free.cpu_milli; }

TEST(DeleteTest, RunningRemoteCopyIsStoppedAndTheNameIsFreeAgain) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000, 600s)}).is_ok());
  world.run_for(2s);
  ASSERT_EQ(source.agent->operations().find_workload("default", "job")->phase,
            model::Phase::kRunning);
  ASSERT_EQ(free_cpu(target), 28000);
  std::string uid = source.agent->operations().find_workload("default", "job")->uid;

  ASSERT_TRUE(source.agent->operations().delete_workload("default", "job").is_ok());
  EXPECT_EQ(source.agent->operations().find_workload("default", "job")->reason, "Deleting");
  world.run_for(1s);
  EXPECT_FALSE(source.agent->operations().find_workload("default", "job").has_value());
  EXPECT_EQ(free_cpu(target), 32000);
  EXPECT_TRUE(target.agent->operations().reservations().empty());
  auto events = source.agent->operations().events(uid);
  ASSERT_TRUE(events.is_ok());
  EXPECT_NE(events->back().text.find("deleted default/job"), std::string::npos);
  EXPECT_TRUE(source.agent->operations().submit({workload("job", 1000, 1s)}).is_ok())
      << "the name is free";
  EXPECT_EQ(source.agent->operations().delete_workload("default", "nope").code(),
            ErrorCode::kNotFound);
}

TEST(DeleteTest, UnreachableTargetKeepsTheWorkloadDeletingUntilItConfirms) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000, 600s)}).is_ok());
  world.run_for(2s);
  ASSERT_TRUE(source.agent->operations().delete_workload("default", "job").is_ok());
  auto cut = [&](const Wire& w) { return w.to != target.id; };
  world.run_for(60s, 250ms, cut);  // far beyond the reservation TTL: no giving up on a running copy
  ASSERT_TRUE(source.agent->operations().find_workload("default", "job").has_value());
  EXPECT_EQ(free_cpu(target), 28000);
  // The source restarts mid-delete; the delete resumes and completes.
  world.restart(source);
  world.run_for(3s);
  EXPECT_FALSE(source.agent->operations().find_workload("default", "job").has_value());
  EXPECT_EQ(free_cpu(target), 32000);
}

// `delete workload --force`, for a cluster gone for good: the workload is
// forgotten at once and its name is free; its copy there cannot run on
// unseen, since the target fences it when the lease lapses.
// A source with an hour-long job of 4 cpu running at its one target.
struct RemoteJob {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target");
  Operations& ops = source.agent->operations();
  std::string uid;
  // Keeps every message to or from the target from arriving.
  std::function<bool(const Wire&)> cut = [this](const Wire& w) {
    return w.to != target.id && w.from != target.id;
  };

  RemoteJob() {
    world.invite(target, source);
    world.run_for(3s);
    EXPECT_TRUE(ops.submit({workload("job", 4000, 3600s)}).is_ok());
    world.run_for(2s);
    EXPECT_EQ(ops.find_workload("default", "job")->phase, model::Phase::kRunning);
    uid = ops.find_workload("default", "job")->uid;
  }
};

TEST(DeleteTest, ForcedDeleteForgetsAtOnceAndTheSilentTargetFencesTheCopy) {
  RemoteJob job;
  auto& [world, source, target, ops, uid, cut] = job;
  ASSERT_TRUE(ops.delete_workload("default", "job").is_ok());
  world.run_for(10s, 250ms, cut);
  ASSERT_EQ(ops.find_workload("default", "job")->reason, "Deleting");

  ASSERT_TRUE(ops.force_delete_workload("default", "job").is_ok());
  EXPECT_FALSE(ops.find_workload("default", "job").has_value());
  auto events = ops.events(uid);
  ASSERT_TRUE(events.is_ok());
  bool told = false;
  for (const auto& event : *events) {
    told |= event.text.find("deleted by force, unconfirmed by target") != std::string::npos;
  }
  EXPECT_TRUE(told) << "the events name the cluster that never confirmed";
  EXPECT_EQ(ops.force_delete_workload("default", "job").code(), ErrorCode::kNotFound);
  // The copy still runs at the unreachable target until its lease lapses.
  EXPECT_EQ(free_cpu(target), 28000);
  world.run_for(150s, 250ms, cut);  // past the 2 min lease, still cut off
  EXPECT_EQ(free_cpu(target), 32000) << "fenced when the source's lease lapsed";
  world.run_for(5s);
  EXPECT_TRUE(ops.submit({workload("job", 1000, 1s)}).is_ok()) << "the name is free";
}

// A target that was only unreachable reports the copy in HOLDINGS when it
// answers again, before its lease lapses: a DELETE stops it.
TEST(DeleteTest, ForcedDeleteStopsTheCopyOfATargetThatAnswersAgain) {
  RemoteJob job;
  auto& [world, source, target, ops, uid, cut] = job;
  world.run_for(5s, 250ms, cut);
  ASSERT_TRUE(ops.force_delete_workload("default", "job").is_ok());
  EXPECT_FALSE(ops.find_workload("default", "job").has_value());
  world.run_for(10s, 250ms, cut);
  EXPECT_EQ(free_cpu(target), 28000) << "within its lease, the copy still runs";
  world.run_for(75s);  // a DIGEST pass, its HOLDINGS and our DELETE
  EXPECT_EQ(free_cpu(target), 32000);
  for (const auto& reservation : target.agent->operations().reservations()) {
    EXPECT_FALSE(reservation.uid == uid && store::holds_resources(reservation.phase))
        << "the forgotten workload's copy still holds room";
  }
}

TEST(DeleteTest, ForcedDeleteOfAGroupForgetsItAndEveryCopyAtOnce) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& east = world.add("east");
  Node& west = world.add("west");
  world.invite(east, source);
  world.invite(west, source);
  world.run_for(3s);
  Operations& ops = source.agent->operations();
  model::WorkloadSpec pair = workload("pair", 2000, 3600s);
  pair.placement.number_of_clusters = 2;
  ASSERT_TRUE(ops.submit({pair}).is_ok());
  world.run_for(3s);
  ASSERT_EQ(ops.find_workload("default", "pair")->phase, model::Phase::kRunning);
  std::string uid = ops.find_workload("default", "pair")->uid;
  ASSERT_EQ(ops.copies_of(uid).size(), 2u);
  auto cut = [&](const Wire& w) { return w.to != east.id && w.from != east.id; };
  ASSERT_TRUE(ops.delete_workload("default", "pair").is_ok());
  world.run_for(5s, 250ms, cut);
  ASSERT_TRUE(ops.find_workload("default", "pair").has_value()) << "east holds the delete";
  ASSERT_TRUE(ops.force_delete_workload("default", "pair").is_ok());
  EXPECT_FALSE(ops.find_workload("default", "pair").has_value());
  EXPECT_TRUE(ops.copies_of(uid).empty());
  EXPECT_EQ(ops.workload_counts().total, 0u);
}

TEST(DeleteTest, PendingWorkloadQueuedAtATargetIsWithdrawnThere) {
  World world;
  Node& source = world.add("source", 1, 500);
  Node& target = world.add("target", 1, 4000);
  world.invite(target, source);
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations()
                  .submit({workload("big", 4000, 600s), workload("waiting", 4000, 1s)})
                  .is_ok());
  world.run_for(2s);
  ASSERT_EQ(source.agent->operations().find_workload("default", "waiting")->phase,
            model::Phase::kPending);
  ASSERT_TRUE(source.agent->operations().delete_workload("default", "waiting").is_ok());
  world.run_for(1s);
  EXPECT_FALSE(source.agent->operations().find_workload("default", "waiting").has_value());
  // When "big" goes, nothing of "waiting" is reserved from the queue.
  ASSERT_TRUE(source.agent->operations().delete_workload("default", "big").is_ok());
  world.run_for(2s);
  EXPECT_TRUE(target.agent->operations().reservations().empty());
  EXPECT_EQ(free_cpu(target), 4000);
}

}  // namespace
}  // namespace shoal::core::testing
