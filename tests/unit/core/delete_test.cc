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
