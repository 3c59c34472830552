// The remote lifecycle: lease fencing and worker lost when peers
// vanish, reconciliation digests and their garbage collection,
// restartPolicy, an operator's delete at the target, status mirroring, the
// readyWindow scoring, and numberOfClusters > 1 (CopiesTest).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "tests/unit/core/lifecycle_fixture.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;

TEST(LifecycleTest, PartitionedWinnerStopsItsCopyBeforeTheSourcePlacesANewOne) {
  Federation f(2s);
  std::string uid = f.submit_long_job();
  f.cut_east = true;
  // Within the lease nothing happens; past it, east stops the copy on its own.
  f.world.run_for(1500ms, 250ms, f.network());
  EXPECT_EQ(running_copies(*f.east, uid), 1);
  f.world.run_for(2s, 250ms, f.network());
  EXPECT_EQ(running_copies(*f.east, uid), 0);
  auto old_copy = copy_at(*f.east, uid);
  ASSERT_TRUE(old_copy.has_value());
  EXPECT_EQ(old_copy->phase, store::ReservationPhase::kFailed);
  EXPECT_EQ(old_copy->message.rfind("LeaseExpired", 0), 0u) << old_copy->message;
  EXPECT_EQ(phase_of(*f.source, "job"), model::Phase::kRunning) << "not lost yet";
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "job")->cluster, "east");

  // After workerLostTimeout the source places it again, at west.
  f.world.run_for(4s, 250ms, f.network());
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "west");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_GT(record->epoch, old_copy->epoch);
  EXPECT_EQ(record->disruptions, 1) << "lost with its worker: not its own failure";
  EXPECT_EQ(record->restarts, 0);
  EXPECT_TRUE(event_contains(*f.source, uid, "worker lost: east"));
  auto new_copy = copy_at(*f.west, uid);
  ASSERT_TRUE(new_copy.has_value());
  EXPECT_LT(old_copy->finished_at_ms, new_copy->started_at_ms) << "the old copy stopped first";

  // The partition heals: east's late report changes nothing, and its
  // finished record is collected once acknowledged and not listed.
  f.cut_east = false;
  f.world.run_for(3s, 250ms, f.network());
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "west");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_FALSE(copy_at(*f.east, uid).has_value()) << "garbage-collected";
  EXPECT_EQ(running_copies(*f.west, uid), 1);
}

// A target must know its source's lease before it binds: the first DIGEST
// can come after the first APPROVE (it is periodic, and a new link's first
// one may be slow). A target that bound unfenced and then froze (or died,
// its work running on) would run the copy on after waking, beside the one
// the source placed once the target was lost. The source sends a DIGEST
// ahead of what binds until the target answers one.
TEST(LifecycleTest, ATargetKnowsTheSourcesLeaseBeforeItBindsItsFirstCopy) {
  World world;
  world.configure = fast_lifecycle_timers;
  Node& source = world.add("source", 1, 500);
  Node& east = world.add("east");
  Node& west = world.add("west", 2);
  // Every DIGEST sent alone to east is lost (a slow first one, stood for).
  auto lone_digests_lost = [&](const Wire& w) {
    return !(w.to == east.id && w.type == protocol::MessageType::kDigest && w.parts == 1);
  };
  world.invite(east, source);
  world.invite(west, source);
  world.run_for(2s, 250ms, lone_digests_lost);
  ASSERT_FALSE(east.agent->operations().peers().front().lease_until.has_value())
      << "the test needs east not to know the lease yet";

  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000, 3600s)}).is_ok());
  world.run_for(250ms, 250ms, lone_digests_lost);
  auto record = source.agent->operations().find_workload("default", "job");
  ASSERT_EQ(record->cluster, "east");
  std::string uid = record->uid;
  ASSERT_EQ(running_copies(east, uid), 1);
  EXPECT_TRUE(east.agent->operations().peers().front().lease_until.has_value())
      << "bound without knowing the source's lease";

  east.frozen = true;
  world.run_for(8s);  // past workerLostTimeout: placed again at west
  ASSERT_EQ(running_copies(west, uid), 1);
  east.frozen = false;
  world.run_for(250ms);
  EXPECT_EQ(running_copies(east, uid), 0) << "two copies run at once";
  auto old_copy = copy_at(east, uid);
  ASSERT_TRUE(old_copy.has_value());
  EXPECT_EQ(old_copy->message.rfind("LeaseExpired", 0), 0u) << old_copy->message;
}

// A target frozen past its source's lease reads, on waking and before its
// first tick, a DELETE its source sent meanwhile. The copy stopped when
// the lease lapsed, the moment the source relies on: it is fenced as of
// then, not stopped as of the DELETE, which may come after the source
// placed the work elsewhere (found by the chaos run).
TEST(LifecycleTest, ADeleteReadOnWakingPastTheLeaseStopsTheCopyAsOfTheLapse) {
  Federation f(2s);
  std::string uid = f.submit_long_job();
  TimePoint frozen_at = f.east->clock->now();
  f.world.freeze(*f.east);
  // The source renews east's lease until east has been silent for
  // workerLostTimeout - lease - skew (3.5 s): the renewals wait in east's
  // socket and end the lease at 5.5 s.
  f.world.run_for(4s);
  ASSERT_TRUE(f.source->agent->operations().delete_workload("default", "job").is_ok());
  f.world.deliver();  // the DELETE waits there too
  f.world.run_for(3s);  // past the lease's end
  f.world.thaw(*f.east, /*read_first=*/true);
  auto runs = f.east->store->load_runs();
  ASSERT_TRUE(runs.is_ok());
  bool found = false;
  for (const store::RunRecord& run : *runs) {
    if (run.uid != uid) continue;
    found = true;
    EXPECT_LE(run.finished_at_ms, to_millis(frozen_at + 6s))
        << "stopped as of the lease's end, not when the DELETE was read: " << run.message;
    EXPECT_EQ(run.message.rfind("LeaseExpired", 0), 0u) << run.message;
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(running_copies(*f.east, uid), 0);
}

TEST(LifecycleTest, WithoutFencingAStaleCopyIsRemovedWhenItsTargetReturns) {
  Federation f(0s);
  std::string uid = f.submit_long_job();
  f.cut_east = true;
  f.world.run_for(8s, 250ms, f.network());
  EXPECT_EQ(running_copies(*f.east, uid), 1) << "no lease: the copy runs on unseen";
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "job")->cluster, "west");
  EXPECT_EQ(running_copies(*f.west, uid), 1);
  f.cut_east = false;
  f.world.run_for(3s, 250ms, f.network());
  EXPECT_EQ(running_copies(*f.east, uid), 0) << "reconciliation removed the stale copy";
  EXPECT_EQ(running_copies(*f.west, uid), 1);
  EXPECT_TRUE(event_contains(*f.source, uid, "removing a stale copy at east"));
}

// The same, with agents that tick only when a timer is due, a millisecond
// late, as the runtime does: the ticks of an idle source must come often
// enough that a late one is not taken for a pause (which would restart the
// silence count of every peer, so a lost winner would never be replaced).
TEST(LifecycleTest, AnIdleSourceTickingOnlyWhenDueStillReplacesALostWinner) {
  World world;
  world.configure = [](AgentConfig& config) {
    // The defaults' proportions: heartbeats far more often than anything else.
    config.heartbeat_interval = 2s;
    config.gc_interval = 60s;
    config.lease = 20s;
    config.max_clock_skew = 500ms;
    config.worker_lost_timeout = 30s;
  };
  Node& source = world.add("source", 1, 500);
  Node& east = world.add("east");
  Node& west = world.add("west", 2);
  world.invite(east, source);
  world.invite(west, source);
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000, 3600s)}).is_ok());
  world.run_for(1s);
  ASSERT_EQ(source.agent->operations().find_workload("default", "job")->cluster, "east");
  auto cut_east = [&](const Wire& w) { return w.to != east.id && w.from != east.id; };
  world.run_as_runtime_for(45s, Duration(1), cut_east);
  auto record = source.agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "west");
  EXPECT_TRUE(event_contains(source, record->uid, "worker lost: east"));
}

TEST(LifecycleTest, WithoutFencingALostCopyNothingReplacedIsAdopted) {
  Federation f(0s);
  std::string uid = f.submit_long_job();
  f.cut_east = true;
  // West is full, so after worker lost nothing can take the job.
  model::WorkloadSpec filler = workload("filler", 8000, 3600s);
  filler.replicas = 2;
  filler.placement.clusters = {"west"};
  ASSERT_TRUE(f.source->agent->operations().submit({filler}).is_ok());
  f.world.run_for(8s, 250ms, f.network());
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(record->phase, model::Phase::kPending) << record->reason;
  int64_t started = copy_at(*f.east, uid)->started_at_ms;
  f.cut_east = false;
  f.world.run_for(3s, 250ms, f.network());
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning) << record->reason;
  EXPECT_EQ(record->cluster, "east");
  EXPECT_EQ(running_copies(*f.east, uid), 1);
  EXPECT_EQ(copy_at(*f.east, uid)->started_at_ms, started) << "the same copy, not a new one";
  EXPECT_EQ(copy_at(*f.east, uid)->epoch, record->epoch);
  EXPECT_TRUE(event_contains(*f.source, uid, "adopting it"));
}

TEST(LifecycleTest, CopyMissingAtTheTargetIsPlacedAgain) {
  Federation f(2s);
  std::string uid = f.submit_long_job();
  // East loses the record (a restored backup, say) and restarts.
  ASSERT_TRUE(f.east->store->delete_reservation(f.source->id, uid).is_ok());
  f.world.restart(*f.east);
  f.world.run_for(3s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_TRUE(event_contains(*f.source, uid, "LostAtTarget: east"));
  EXPECT_EQ(running_copies(*f.east, uid) + running_copies(*f.west, uid), 1);
}

TEST(LifecycleTest, FinishedCopiesAreCollectedOnBothSides) {
  Federation f(2s);
  ASSERT_TRUE(f.source->agent->operations().submit({workload("short", 4000, 2s)}).is_ok());
  model::WorkloadSpec local = workload("local", 100, 1s);
  local.placement.clusters = {"source"};
  ASSERT_TRUE(f.source->agent->operations().submit({local}).is_ok());
  f.world.run_for(4s);
  EXPECT_EQ(phase_of(*f.source, "short"), model::Phase::kSucceeded);
  EXPECT_EQ(phase_of(*f.source, "local"), model::Phase::kSucceeded);
  EXPECT_TRUE(f.east->agent->operations().reservations().empty());
  EXPECT_TRUE(f.source->agent->operations().reservations().empty());
  EXPECT_TRUE(f.east->store->load_reservations()->empty()) << "gone from disk too";
}

TEST(LifecycleTest, OperatorDeleteAtTheTargetIsMirroredAndPlacedAgainElsewhere) {
  Federation f(2s);
  std::string uid = f.submit_long_job(model::RestartPolicy::kOnFailure);
  EXPECT_EQ(f.east->agent->operations().stop_hosted("default", "nope", "").code(),
            ErrorCode::kNotFound);
  ASSERT_TRUE(f.east->agent->operations().stop_hosted("default", "job", "").is_ok());
  f.world.run_for(500ms);
  EXPECT_TRUE(event_contains(*f.source, uid, "Failed at east: DeletedAtTarget"));
  EXPECT_EQ(phase_of(*f.source, "job"), model::Phase::kPending);
  EXPECT_NE(reason_of(*f.source, "job").find("DeletedAtTarget"), std::string::npos);
  f.world.run_for(2s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_EQ(record->cluster, "west") << "not at the target that deleted it";
  EXPECT_EQ(record->disruptions, 1);
  EXPECT_EQ(record->restarts, 0);
}

// A delete at the target is not the job's failure: under the default
// restartPolicy Never it is placed again all the same, elsewhere.
TEST(LifecycleTest, OperatorDeleteAtTheTargetIsPlacedAgainElsewhereEvenUnderNever) {
  Federation f(2s);
  std::string uid = f.submit_long_job();
  ASSERT_TRUE(f.east->agent->operations().stop_hosted("default", "job", "source").is_ok());
  f.world.run_for(5s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_EQ(record->cluster, "west");
  EXPECT_EQ(record->disruptions, 1);
  EXPECT_EQ(record->restarts, 0);
  EXPECT_TRUE(event_contains(*f.source, uid, "disruption 1 in"));
  EXPECT_EQ(running_copies(*f.east, uid), 0);
  EXPECT_EQ(running_copies(*f.west, uid), 1);
}

// Past its budget of disruptions a workload ends Failed, with why, and is
// placed no more: a delete at each target in turn, one more than allowed.
TEST(LifecycleTest, PastMaxDisruptionsAWorkloadEndsFailedAndIsPlacedNoMore) {
  Federation f(2s);
  model::WorkloadSpec spec = workload("job", 4000, 3600s);
  spec.max_disruptions = 1;
  std::string uid = f.bind_at_east(spec, 1s);
  ASSERT_TRUE(f.east->agent->operations().stop_hosted("default", "job", "").is_ok());
  f.world.run_for(3s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(record->phase, model::Phase::kRunning) << "one disruption is within the budget";
  ASSERT_EQ(record->cluster, "west");
  ASSERT_TRUE(f.west->agent->operations().stop_hosted("default", "job", "").is_ok());
  f.world.run_for(5s);
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kFailed);
  EXPECT_EQ(record->disruptions, 2);
  EXPECT_EQ(record->reason.rfind("TooManyDisruptions: 2 ends not its own, more than its maxDisruptions (1); "
                                 "the last: DeletedAtTarget at west", 0),
            0u)
      << record->reason;
  EXPECT_TRUE(event_contains(*f.source, uid, "Failed, not placed again: TooManyDisruptions"));
  EXPECT_EQ(running_copies(*f.east, uid) + running_copies(*f.west, uid), 0) << "placed no third time";
}

// A worker lost counts against the budget too; its copy turning up again
// is removed, never taken back for a workload that ended.
TEST(LifecycleTest, AWorkerLostPastTheAgentsMaxDisruptionsEndsTheWorkloadFailed) {
  Federation f(2s, [](AgentConfig& config) { config.max_disruptions = 0; });
  std::string uid = f.submit_long_job();
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "job")->spec.max_disruptions, 0)
      << "the agent's maxDisruptions, stored with a spec that set none";
  f.cut_east = true;
  f.world.run_for(8s, 250ms, f.network());
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kFailed);
  EXPECT_EQ(record->disruptions, 1);
  EXPECT_EQ(record->reason.rfind("TooManyDisruptions: 1 ends not its own", 0), 0u) << record->reason;
  EXPECT_NE(record->reason.find("worker lost: east"), std::string::npos) << record->reason;
  EXPECT_EQ(running_copies(*f.west, uid), 0);
  f.cut_east = false;
  f.world.run_for(3s, 250ms, f.network());
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kFailed);
  EXPECT_EQ(running_copies(*f.east, uid) + running_copies(*f.west, uid), 0);
}

// OnFailure restarts have their own bound: past maxRestarts the workload
// ends Failed with its last exit code.
TEST(LifecycleTest, PastMaxRestartsAnOnFailureWorkloadEndsFailed) {
  Federation f(2s);
  model::WorkloadSpec spec = workload("crashy", 4000, 1s);
  spec.sim.exit_code = 3;
  spec.restart_policy = model::RestartPolicy::kOnFailure;
  spec.max_restarts = 2;
  ASSERT_TRUE(f.source->agent->operations().submit({spec}).is_ok());
  f.world.run_for(15s);
  auto record = f.source->agent->operations().find_workload("default", "crashy");
  EXPECT_EQ(record->phase, model::Phase::kFailed);
  EXPECT_EQ(record->restarts, 3);
  EXPECT_EQ(record->exit_code, 3);
  EXPECT_EQ(record->reason.rfind("TooManyRestarts: 3 restarts, more than its maxRestarts (2)", 0), 0u)
      << record->reason;
  EXPECT_TRUE(event_contains(*f.source, record->uid, "restart 2 in"));
  EXPECT_FALSE(event_contains(*f.source, record->uid, "restart 3 in"));
}

TEST(LifecycleTest, ExitCodeIsMirroredAndOnFailureRestartsWithBackoff) {
  Federation f(2s);
  model::WorkloadSpec spec = workload("crashy", 4000, 1s);
  spec.sim.exit_code = 3;
  spec.restart_policy = model::RestartPolicy::kOnFailure;
  ASSERT_TRUE(f.source->agent->operations().submit({spec}).is_ok());
  f.world.run_for(1500ms);
  auto record = f.source->agent->operations().find_workload("default", "crashy");
  EXPECT_EQ(record->restarts, 1);
  std::string uid = record->uid;
  EXPECT_TRUE(event_contains(*f.source, uid, "Failed at east"));
  EXPECT_TRUE(event_contains(*f.source, uid, "restart 1 in 1s"));
  f.world.run_for(6s);
  record = f.source->agent->operations().find_workload("default", "crashy");
  EXPECT_GE(record->restarts, 3);
  EXPECT_TRUE(event_contains(*f.source, uid, "restart 3 in 4s")) << "1s, 2s, 4s: doubling to the cap";

  model::WorkloadSpec once = workload("once", 4000, 1s);
  once.sim.exit_code = 7;
  ASSERT_TRUE(f.source->agent->operations().submit({once}).is_ok());
  f.world.run_for(4s);
  record = f.source->agent->operations().find_workload("default", "once");
  EXPECT_EQ(record->phase, model::Phase::kFailed);
  EXPECT_EQ(record->exit_code, 7);
  EXPECT_EQ(record->restarts, 0);
}

TEST(LifecycleTest, HundredRapidStatusChangesEndWithTheLastOneInAnyArrivalOrder) {
  Federation f(0s);
  std::string uid = f.submit_long_job();
  uint64_t epoch = f.source->agent->operations().find_workload("default", "job")->epoch;
  // 100 changes from east, arriving in a shuffled order, each in a fresh
  // envelope whose sequence number rises with arrival (as re-sent reports
  // do): every one passes the replay check, so only the generation guard
  // can keep an older change from overwriting a newer one.
  std::vector<protocol::WorkloadStatus> changes;
  for (uint64_t i = 1; i <= 100; ++i) {
    protocol::WorkloadStatus status;
    status.uid = uid;
    status.epoch = epoch;
    status.generation = 1000 + i;
    status.phase = i < 100 ? model::Phase::kRunning : model::Phase::kSucceeded;
    status.nodes = {"node-0"};
    status.started_at_ms = to_millis(f.world.clock().now());
    status.finished_at_ms = i < 100 ? 0 : status.started_at_ms + 1;
    status.message = "change " + std::to_string(i);
    changes.push_back(status);
  }
  std::mt19937 shuffle_rng(7);
  std::shuffle(changes.begin(), changes.end(), shuffle_rng);
  ASSERT_NE(changes.back().generation, 1100u) << "the newest change must not arrive last";
  uint64_t replayed_before = f.source->agent->operations()
                                 .stats()
                                 .dropped[static_cast<size_t>(protocol::DropReason::kReplayed)];
  uint64_t seq = 1'000'000;  // above anything east really sent
  for (const auto& status : changes) {
    f.source->agent->handle_wire(forge(*f.east, *f.source, status, ++seq, f.world.clock().now()));
  }
  EXPECT_EQ(f.source->agent->operations()
                .stats()
                .dropped[static_cast<size_t>(protocol::DropReason::kReplayed)],
            replayed_before)
      << "every change was delivered";
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kSucceeded);
  EXPECT_EQ(record->reason, "change 100");
  EXPECT_EQ(record->status_generation, 1100u);
}

// Whether a failed copy is placed again is decided by its condition code,
// never by its message, which is text for people: every end its job did not
// cause is placed again as a disruption, a copy that could not start as a
// restart, and its own failure (kNone: the exit code) follows restartPolicy.
TEST(LifecycleTest, AFailedCopyIsPlacedAgainByItsConditionNotItsMessage) {
  using protocol::CopyCondition;
  for (CopyCondition condition :
       {CopyCondition::kNone, CopyCondition::kLeaseExpired, CopyCondition::kStartFailed,
        CopyCondition::kDeletedAtTarget, CopyCondition::kRevoked, CopyCondition::kLostOnRestart,
        CopyCondition::kNodeFailed, CopyCondition::kEvicted, CopyCondition::kPreempted}) {
    std::string name(protocol::kCopyConditionNames[static_cast<int>(condition)]);
    bool disrupted = protocol::is_disruption(condition);
    bool placed_again = condition != CopyCondition::kNone;
    Federation f(0s);
    std::string uid = f.submit_long_job();  // restartPolicy Never
    auto record = f.source->agent->operations().find_workload("default", "job");
    protocol::WorkloadStatus status;
    status.uid = uid;
    status.epoch = record->epoch;
    status.generation = 1000;
    status.phase = model::Phase::kFailed;
    status.nodes = {"node-0"};
    status.started_at_ms = to_millis(f.world.clock().now());
    status.finished_at_ms = status.started_at_ms + 1;
    status.exit_code = -1;
    // The text says the opposite of the code each time.
    status.message = placed_again ? "exited" : "LeaseExpired: no renewal from source";
    status.condition = condition;
    f.source->agent->handle_wire(
        forge(*f.east, *f.source, status, 1'000'000, f.world.clock().now()));
    record = f.source->agent->operations().find_workload("default", "job");
    EXPECT_EQ(record->disruptions, disrupted ? 1 : 0) << name;
    EXPECT_EQ(record->restarts, placed_again && !disrupted ? 1 : 0) << name;
    EXPECT_EQ(record->phase, placed_again ? model::Phase::kPending : model::Phase::kFailed) << name;
  }
}

// A copy that ends for a reason not its own is placed again in a new
// round. Until then nothing its old round's targets answer may decide: here
// west's queue serves the old epoch late. Before the fix the source approved
// east, the failed winner and first-ranked, again at the old epoch (and,
// holding no quota while it waited, could pass its namespace's quota).
TEST(LifecycleTest, ALateAnswerOfTheRoundAFailedCopyWonApprovesNothingAgain) {
  Federation f(2s);
  std::string uid = f.bind_at_east(workload("job", 4000, 3600s));
  f.world.run_for(500ms);
  ASSERT_EQ(phase_of(*f.source, "job"), model::Phase::kRunning);
  uint64_t epoch = f.source->agent->operations().find_workload("default", "job")->epoch;
  f.world.step(*f.east, [&] {
    ASSERT_TRUE(f.east->agent->operations().stop_hosted("default", "job", "source").is_ok());
  });
  f.world.deliver();
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(record->phase, model::Phase::kPending) << record->reason;
  ASSERT_EQ(record->epoch, epoch) << "still waiting out its backoff";

  int approvals = 0;
  auto count = [&](const Wire& w) {
    approvals += w.type == protocol::MessageType::kApprove && w.from == f.source->id;
    return true;
  };
  f.world.step(*f.source, [&] {
    f.source->agent->handle_wire(
        forge(*f.west, *f.source, protocol::Ready{uid, epoch, 50.0}, 1'000'000, f.world.clock().now()));
  });
  f.world.deliver(count);
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(approvals, 0) << "approved " << record->cluster << " at the old epoch";
  EXPECT_TRUE(record->winner.empty() || record->epoch > epoch) << "won by " << record->cluster;
}

TEST(LifecycleTest, ChangesWithinOneTickAreCoalescedIntoOneStatus) {
  Federation f(2s);
  int statuses = 0;
  auto count = [&](const Wire& w) {
    if (w.type == protocol::MessageType::kStatus && w.from == f.east->id) ++statuses;
    return true;
  };
  // Starts and finishes between two ticks: Bound, then one report for both
  // Running and Succeeded (never Succeeded followed by a stale Running).
  ASSERT_TRUE(f.source->agent->operations().submit({workload("blink", 4000, 100ms)}).is_ok());
  f.world.deliver(count);
  f.world.run_for(1s, 250ms, count);
  EXPECT_EQ(phase_of(*f.source, "blink"), model::Phase::kSucceeded);
  EXPECT_EQ(statuses, 2);
}

TEST(LifecycleTest, AClaimedCopyIsAdoptedOnlyWhereAReadyWouldHaveBeenAccepted) {
  Federation f(2s);
  // West only, and west is full: the job waits.
  model::WorkloadSpec filler = workload("filler", 8000, 3600s);
  filler.replicas = 2;
  filler.placement.clusters = {"west"};
  model::WorkloadSpec job = workload("job", 4000, 3600s);
  job.placement.clusters = {"west"};
  ASSERT_TRUE(f.source->agent->operations().submit({filler, job}).is_ok());
  f.world.run_for(2s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(record->phase, model::Phase::kPending);
  // East (outside the allow list) claims to run it.
  protocol::Holdings claim{{{record->uid, record->epoch, model::Phase::kRunning}}};
  f.source->agent->handle_wire(forge(*f.east, *f.source, claim, 1, f.world.clock().now()));
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kPending);
  EXPECT_TRUE(record->winner.empty()) << "not adopted at " << record->cluster;
  EXPECT_TRUE(event_contains(*f.source, record->uid, "removing a stale copy at east"));
}

TEST(LifecycleTest, RestartBackoffSurvivesASourceRestart) {
  World world;
  world.configure = [](AgentConfig& config) {
    fast_lifecycle_timers(config);
    config.pending_retry = 10s;
    config.pending_retry_max = 20s;
  };
  Node& source = world.add("source", 1, 500);
  Node& east = world.add("east");
  world.invite(east, source);
  world.run_for(2s);
  model::WorkloadSpec spec = workload("crashy", 4000, 1s);
  spec.sim.exit_code = 3;
  spec.restart_policy = model::RestartPolicy::kOnFailure;
  ASSERT_TRUE(source.agent->operations().submit({spec}).is_ok());
  world.run_for(2s);
  auto record = source.agent->operations().find_workload("default", "crashy");
  ASSERT_EQ(record->restarts, 1);
  ASSERT_EQ(record->phase, model::Phase::kPending);
  uint64_t epoch = record->epoch;
  world.restart(source);
  world.run_for(5s);
  record = source.agent->operations().find_workload("default", "crashy");
  EXPECT_EQ(record->phase, model::Phase::kPending) << "still backing off after the restart";
  EXPECT_EQ(record->epoch, epoch);
  world.run_for(5s);
  EXPECT_GT(source.agent->operations().find_workload("default", "crashy")->epoch, epoch)
      << "placed again after 10s";
}

// Three targets of different size: their READY scores (free cpu after the
// reservation) differ, and READYs are delivered in node order a, b, c.
struct ScoringWorld {
  World world;
  Node* source;
  Node* a;
  Node* b;
  Node* c;
  ScoringWorld() {
    source = &world.add("source", 1, 500);
    a = &world.add("a", 1);  // 7000/8000 free after a 1-cpu job: 87.5
    b = &world.add("b", 4);  // 96.9
    c = &world.add("c", 2);  // 93.8
    for (Node* target : {a, b, c}) world.invite(*target, *source);
    world.run_for(2s);
  }
  model::WorkloadSpec job(Duration window, int min_ready = 0) {
    model::WorkloadSpec spec = workload("job", 1000, 3600s);
    spec.placement.ready_window = window;
    spec.placement.min_ready = min_ready;
    return spec;
  }
};

TEST(LifecycleTest, ReadyWindowApprovesTheBestScoreNotTheFirstAnswer) {
  ScoringWorld s;
  ASSERT_TRUE(s.source->agent->operations().submit({s.job(3s)}).is_ok());
  s.world.run_for(1s);
  auto record = s.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "b") << "every candidate answered: no need to wait the window out";
  EXPECT_TRUE(event_contains(*s.source, record->uid, "READY 96.9)"));
  s.world.run_for(1s);
  EXPECT_EQ(phase_of(*s.source, "job"), model::Phase::kRunning);
  EXPECT_TRUE(s.a->agent->operations().reservations().empty()) << "the others were cancelled";
  EXPECT_TRUE(s.c->agent->operations().reservations().empty());
}

TEST(LifecycleTest, ReadyWindowClosesOnTimeWhenATargetStaysSilent) {
  ScoringWorld s;
  auto silent_b = [&](const Wire& w) { return w.from != s.b->id; };
  ASSERT_TRUE(s.source->agent->operations().submit({s.job(2s)}).is_ok());
  s.world.run_for(1500ms, 250ms, silent_b);
  EXPECT_TRUE(s.source->agent->operations().find_workload("default", "job")->winner.empty())
      << "window still open";
  s.world.run_for(1s, 250ms, silent_b);
  auto record = s.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "c") << "the best of those that answered";
  EXPECT_TRUE(event_contains(*s.source, record->uid, "readyWindow 2s closed"));
}

// A READY repeated for a re-sent CANDIDATE says nothing new: the score is
// the one the reservation was made with (a repeat carried score 0,
// and a target whose first READY came early was ranked last).
TEST(LifecycleTest, ARepeatedReadyKeepsTheScoreOfTheFirst) {
  ScoringWorld s;
  auto silent_a = [&](const Wire& w) { return w.from != s.a->id; };  // keeps the window open
  ASSERT_TRUE(s.source->agent->operations().submit({s.job(2s)}).is_ok());
  s.world.run_for(500ms, 250ms, silent_a);
  auto record = s.source->agent->operations().find_workload("default", "job");
  ASSERT_TRUE(record->winner.empty()) << "window still open";
  // b (96.9) answered; the same READY again, as a target's repeat path sends it.
  s.world.step(*s.source, [&] {
    s.source->agent->handle_wire(forge(*s.b, *s.source, protocol::Ready{record->uid, record->epoch, 0},
                                       1, s.world.clock().now()));
  });
  s.world.run_for(2s, 250ms, silent_a);
  record = s.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "b") << "b's first READY scored best; its repeat must not lower it";
  EXPECT_TRUE(event_contains(*s.source, record->uid, "READY 96.9)"));
}

TEST(LifecycleTest, MinReadyStopsCollectingEarlyAndTiesGoByName) {
  ScoringWorld s;
  auto silent_b = [&](const Wire& w) { return w.from != s.b->id; };
  ASSERT_TRUE(s.source->agent->operations().submit({s.job(20s, 2)}).is_ok());
  s.world.run_for(500ms, 250ms, silent_b);
  EXPECT_EQ(s.source->agent->operations().find_workload("default", "job")->cluster, "c");

  SourceAndTwoTargets tie("zeta", "alpha", 500);
  Node& source = tie.source;
  ASSERT_TRUE(source.agent->operations().submit({s.job(5s)}).is_ok());
  tie.world.run_for(1s);
  EXPECT_EQ(source.agent->operations().find_workload("default", "job")->cluster, "alpha");
}

TEST(LifecycleTest, ReadyWindowMustFitInTheReservationAndMinReadyNeedsAWindow) {
  ScoringWorld s;
  auto too_long = s.source->agent->operations().submit({s.job(30s)});
  EXPECT_EQ(too_long.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("spec.placement.readyWindow"), std::string::npos);
  auto no_window = s.source->agent->operations().submit({s.job(0s, 2)});
  EXPECT_NE(no_window.status().message().find("spec.placement.minReady"), std::string::npos);
}

TEST(LifecycleTest, FencingTimersAreValidated) {
  AgentConfig config;
  EXPECT_EQ(check_fencing_timers(config), "");
  config.worker_lost_timeout = config.lease + config.max_clock_skew;
  EXPECT_NE(check_fencing_timers(config).find("workerLostTimeout"), std::string::npos);
  config.lease = 0s;
  EXPECT_EQ(check_fencing_timers(config), "") << "no fencing, nothing to check";
}

}  // namespace
}  // namespace shoal::core::testing

namespace shoal::core::testing {
namespace {

TEST(CopiesTest, EachCopyRunsOnADifferentClusterAndTheGroupMirrorsThemAll) {
  ThreeTargets t;
  ASSERT_TRUE(t.source->agent->operations().submit({t.job(2)}).is_ok());
  t.world.run_for(1s);
  auto group = t.source->agent->operations().find_workload("default", "job");
  ASSERT_TRUE(group.has_value());
  EXPECT_EQ(group->phase, model::Phase::kRunning) << group->reason;
  EXPECT_EQ(group->reason, "2/2 running");
  auto copies = t.source->agent->operations().copies_of(group->uid);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_NE(copies[0].cluster, copies[1].cluster);
  EXPECT_EQ(copies[0].copy_index, 1);
  EXPECT_EQ(copies[1].copy_index, 2);
  EXPECT_EQ(t.running().size(), 2u);
  std::set<std::string> clusters;
  for (const auto& [uid, cluster] : t.running()) clusters.insert(cluster);
  EXPECT_EQ(clusters.size(), 2u) << "never two copies on one cluster";
  EXPECT_EQ(t.source->agent->operations().workloads().size(), 1u)
      << "copies are not listed as workloads";
  EXPECT_TRUE(event_contains(*t.source, group->uid, "copy 1: winner"));
}

TEST(CopiesTest, ACopyWithOnlyASiblingsClusterFreeQueuesAtTheFullOnes) {
  ThreeTargets t;
  t.world.configure = [](AgentConfig& config) {
    fast_lifecycle_timers(config);
    config.pending_retry = 30s;  // a wait for the backoff would show
    config.pending_retry_max = 60s;
  };
  t.world.restart(*t.source);
  t.world.run_for(1s);
  for (const char* full : {"north", "west"}) {
    model::WorkloadSpec filler = workload(std::string("filler-") + full, 8000, 3600s);
    filler.placement.clusters = {full};
    ASSERT_TRUE(t.source->agent->operations().submit({filler}).is_ok());
  }
  t.world.run_for(1s);
  ASSERT_TRUE(t.source->agent->operations().submit({t.job(2)}).is_ok());
  t.world.run_for(2s);
  // East holds copy 1; copy 2 waits in the queues of north and west, and
  // the group is not Running.
  auto group = t.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(group->phase, model::Phase::kPlacing) << group->reason;
  EXPECT_NE(group->reason.find("1/2 running"), std::string::npos) << group->reason;
  int pending = 0;
  for (const auto& copy : t.source->agent->operations().copies_of(group->uid)) {
    if (copy.phase != model::Phase::kPending) continue;
    ++pending;
    EXPECT_EQ(copy.reason.rfind("Unschedulable: ", 0), 0u) << copy.reason;
    EXPECT_NE(copy.reason.find("north=NoCapacity"), std::string::npos) << copy.reason;
    EXPECT_NE(copy.reason.find("east=HoldsAnotherCopy"), std::string::npos) << copy.reason;
  }
  EXPECT_EQ(pending, 1);
  EXPECT_EQ(t.running().size(), 3u) << "two fillers and one copy";
  // ... so when north frees, it is served from there at once.
  ASSERT_TRUE(t.source->agent->operations().delete_workload("default", "filler-north").is_ok());
  t.world.run_for(2s);
  group = t.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(group->phase, model::Phase::kRunning) << group->reason;
  EXPECT_EQ(group->cluster, "east,north");
}

TEST(CopiesTest, MoreCopiesThanAllowedOrNominatedClustersIsAClearError) {
  ThreeTargets t;
  model::WorkloadSpec spec = t.job(3);
  spec.placement.clusters = {"east", "west"};
  auto refused = t.source->agent->operations().submit({spec});
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("spec.placement.numberOfClusters: expected at most 2"),
            std::string::npos)
      << refused.status().message();
  spec.placement.clusters.clear();
  spec.placement.dispatcher = model::Dispatcher::kExternal;
  ASSERT_TRUE(t.source->agent->operations().submit({spec}).is_ok());
  Status short_list = t.source->agent->operations().nominate("default", "job", {"east", "west"});
  EXPECT_NE(short_list.message().find("clusters: expected at least 3"), std::string::npos)
      << short_list.message();
  ASSERT_TRUE(
      t.source->agent->operations().nominate("default", "job", {"east", "north", "west"}).is_ok());
  t.world.run_for(1s);
  EXPECT_EQ(t.source->agent->operations().find_workload("default", "job")->phase,
            model::Phase::kRunning);
  EXPECT_EQ(t.running().size(), 3u);
}

TEST(CopiesTest, GroupSucceedsWhenEveryCopyDidAndDeleteRemovesEveryCopy) {
  ThreeTargets t;
  ASSERT_TRUE(t.source->agent->operations().submit({t.job(3, 4000, 2s)}).is_ok());
  t.world.run_for(4s);
  auto group = t.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(group->phase, model::Phase::kSucceeded) << group->reason;
  EXPECT_NE(group->finished_at_ms, 0);

  model::WorkloadSpec other = t.job(2);
  other.name = "long";
  ASSERT_TRUE(t.source->agent->operations().submit({other}).is_ok());
  t.world.run_for(1s);
  ASSERT_EQ(t.running().size(), 2u);
  std::string uid = t.source->agent->operations().find_workload("default", "long")->uid;
  ASSERT_TRUE(t.source->agent->operations().delete_workload("default", "long").is_ok());
  t.world.run_for(2s);
  EXPECT_FALSE(t.source->agent->operations().find_workload("default", "long").has_value());
  EXPECT_TRUE(t.source->agent->operations().copies_of(uid).empty());
  EXPECT_TRUE(t.running().empty());
  EXPECT_TRUE(t.source->agent->operations().submit({other}).is_ok()) << "the name is free again";
}

TEST(CopiesTest, LostCopyIsReplacedOnAClusterWithoutASiblingAndSurvivesARestart) {
  ThreeTargets t;
  ASSERT_TRUE(t.source->agent->operations().submit({t.job(2)}).is_ok());
  t.world.run_for(1s);
  auto group = t.source->agent->operations().find_workload("default", "job");
  auto copies = t.source->agent->operations().copies_of(group->uid);
  ASSERT_EQ(copies.size(), 2u);
  Node* lost = nullptr;
  for (Node* target : t.targets) {
    if (target->name == copies[0].cluster) lost = target;
  }
  ASSERT_NE(lost, nullptr);
  auto cut = [&](const Wire& w) { return w.to != lost->id && w.from != lost->id; };
  t.world.run_for(8s, 250ms, cut);
  copies = t.source->agent->operations().copies_of(group->uid);
  EXPECT_NE(copies[0].cluster, lost->name);
  EXPECT_NE(copies[0].cluster, copies[1].cluster);
  EXPECT_EQ(copies[0].disruptions, 1);
  EXPECT_EQ(copies[1].disruptions, 0);
  EXPECT_EQ(copies[0].restarts + copies[1].restarts, 0);
  EXPECT_EQ(t.source->agent->operations().find_workload("default", "job")->phase,
            model::Phase::kRunning);

  t.world.restart(*t.source);
  t.world.run_for(2s, 250ms, cut);
  group = t.source->agent->operations().find_workload("default", "job");
  ASSERT_TRUE(group.has_value());
  EXPECT_EQ(group->spec.placement.number_of_clusters, 2);
  EXPECT_EQ(t.source->agent->operations().copies_of(group->uid).size(), 2u);
  EXPECT_EQ(group->phase, model::Phase::kRunning) << group->reason;
  EXPECT_EQ(t.running().size(), 2u);
}


// A backend that queues work and never starts it (a drained Slurm
// partition): launches and stops are recorded, in order, by the test.
class NeverStartsRunner final : public cluster::Runner {
 public:
  explicit NeverStartsRunner(std::vector<std::string>* log) : log_(log) {}
  Status launch(const cluster::LaunchRequest& request) override {
    log_->push_back("launch " + request.key);
    return Status::ok();
  }
  bool stop(const std::string& key, Duration) override {
    log_->push_back("stop " + key);
    return true;
  }
  std::vector<cluster::WorkloadEvent> observe(TimePoint) override { return {}; }
  TimePoint next_event_at() const override { return TimePoint::max(); }
  void forget(const std::string&) override {}
  std::string describe(const std::string&) const override { return ""; }
  std::string unstarted_reason(const std::string&) const override { return "ReqNodeNotAvail"; }
  Result<cluster::LogChunk> read_log(const std::string&, int, int64_t, size_t) const override {
    return not_found("none");
  }
  bool reports_starts() const override { return true; }

 private:
  std::vector<std::string>* log_;
};

// startTimeout: a copy bound where its cluster keeps it pending is given
// up by that target once the timeout has passed since it was bound, and
// placed again elsewhere as a disruption, not at that target again. The
// source's agent.yaml startTimeout applies to a workload that sets none.
struct StartTimeoutFixture {
  World world;
  std::vector<std::string> east_log;  // what east's backend was asked, in order
  Node* source;
  Node* east;
  Node* west;
  explicit StartTimeoutFixture(Duration agent_start_timeout) {
    world.configure = [agent_start_timeout](AgentConfig& config) {
      fast_lifecycle_timers(config);
      config.start_timeout = agent_start_timeout;
    };
    world.runner_for = [this](const std::string& name) -> std::unique_ptr<cluster::Runner> {
      if (name != "east") return nullptr;
      return std::make_unique<NeverStartsRunner>(&east_log);
    };
    source = &world.add("source", 1, 500);
    east = &world.add("east");
    west = &world.add("west", 2);  // less room: east ranks first
    world.invite(*east, *source);
    world.invite(*west, *source);
    world.run_for(2s);
  }
};

TEST(LifecycleTest, ACopyNotStartedWithinItsStartTimeoutIsPlacedAgainElsewhere) {
  StartTimeoutFixture f(0s);
  model::WorkloadSpec spec = workload("job", 4000, 3600s);
  spec.start_timeout = 3s;
  ASSERT_TRUE(f.source->agent->operations().submit({spec}).is_ok());
  f.world.run_for(2s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->cluster, "east");
  EXPECT_EQ(record->phase, model::Phase::kBound) << "east's backend keeps it pending";
  const std::string uid = record->uid;
  f.world.run_for(6s);
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_EQ(record->cluster, "west");
  EXPECT_EQ(record->disruptions, 1);
  EXPECT_EQ(record->restarts, 0);
  EXPECT_TRUE(event_contains(*f.source, uid, "Failed at east: StartTimeout"));
  // Why it waited there, as east's backend said, reaches the source.
  EXPECT_TRUE(event_contains(*f.source, uid, "at east (ReqNodeNotAvail)"));
  EXPECT_TRUE(event_contains(*f.source, uid, "not placed there again"));
  // East stopped its pending job before the source placed the work again.
  const std::string key = f.source->id + "/" + uid;
  EXPECT_EQ(f.east_log, (std::vector<std::string>{"launch " + key, "stop " + key}));
  EXPECT_EQ(running_copies(*f.east, uid), 0);
  EXPECT_TRUE(event_contains(*f.east, uid, "given up: not started within its startTimeout of 3s at east"));
  // The copy that started is never given up, however long it runs.
  f.world.run_for(10s);
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "job")->phase,
            model::Phase::kRunning);
  EXPECT_EQ(running_copies(*f.west, uid), 1);
}

TEST(LifecycleTest, TheSourcesStartTimeoutAppliesToAWorkloadThatSetsNone) {
  StartTimeoutFixture f(3s);
  ASSERT_TRUE(f.source->agent->operations().submit({workload("job", 4000, 3600s)}).is_ok());
  f.world.run_for(2s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->spec.start_timeout, 3s) << "stored with the spec, carried to the target";
  EXPECT_EQ(record->phase, model::Phase::kBound);
  f.world.run_for(6s);
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "west");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
}

TEST(LifecycleTest, WithoutAStartTimeoutABoundCopyWaitsAsLongAsItsClusterKeepsIt) {
  StartTimeoutFixture f(0s);
  ASSERT_TRUE(f.source->agent->operations().submit({workload("job", 4000, 3600s)}).is_ok());
  f.world.run_for(60s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->cluster, "east");
  EXPECT_EQ(record->phase, model::Phase::kBound);
  EXPECT_EQ(record->disruptions, 0);
}


namespace {

// One source, one target of a single 8-cpu node. A blocker holds the node;
// two more wait in the target's queue, in the order they came.
struct QueuedAtTarget {
  World world;
  Node* source;
  Node* east;
  TimePoint blocker_ends{};
  QueuedAtTarget() {
    world.configure = fast_lifecycle_timers;
    source = &world.add("source", 1, 500);
    east = &world.add("east", 1, 8000);
    world.invite(*east, *source);
    world.run_for(2s);
    model::WorkloadSpec blocker = workload("blocker", 8000, 10s);
    EXPECT_TRUE(source->agent->operations().submit({blocker}).is_ok());
    world.run_for(500ms);
    auto record = source->agent->operations().find_workload("default", "blocker");
    EXPECT_EQ(record->phase, model::Phase::kRunning);
    blocker_ends = from_millis(record->started_at_ms) + 10s;
    EXPECT_TRUE(source->agent->operations().submit({workload("first", 8000, 60s)}).is_ok());
    world.run_for(100ms);
    EXPECT_TRUE(source->agent->operations().submit({workload("second", 8000, 60s)}).is_ok());
    world.run_for(1s);
  }
  model::Phase phase(const std::string& name) {
    return source->agent->operations().find_workload("default", name)->phase;
  }
};

}  // namespace

TEST(PriorityTest, RaisingAQueuedWorkloadsPriorityLetsItRunFirstAtTheTarget) {
  QueuedAtTarget f;
  for (const char* name : {"first", "second"}) {
    ASSERT_EQ(f.phase(name), model::Phase::kPending);
    ASSERT_NE(reason_of(*f.source, name).find("NoCapacity"), std::string::npos)
        << "queued at east: " << reason_of(*f.source, name);
  }
  // Just before the blocker ends, so the queue is served before any
  // CANDIDATE is asked again: the PRIORITY message alone reorders it.
  f.world.run_for(f.blocker_ends - 100ms - f.world.clock().now(), 10ms);
  ASSERT_TRUE(f.source->agent->operations().set_priority("default", "second", 10).is_ok());
  f.world.run_for(600ms, 10ms);
  EXPECT_EQ(f.phase("second"), model::Phase::kRunning) << "the higher priority runs first";
  EXPECT_NE(f.phase("first"), model::Phase::kRunning);
  auto second = f.source->agent->operations().find_workload("default", "second");
  EXPECT_EQ(second->spec.priority, 10);
  EXPECT_TRUE(event_contains(*f.source, second->uid, "priority 10 (was 0)"));
  EXPECT_TRUE(event_contains(*f.east, second->uid, "queued again at east"));
  auto copy = copy_at(*f.east, second->uid);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->spec.priority, 10) << "the target runs it at its new priority";
}

TEST(PriorityTest, ALostPriorityMessageIsMadeGoodByTheNextCandidateAndDigest) {
  QueuedAtTarget f;
  auto no_priority = [](const Wire& w) { return w.type != protocol::MessageType::kPriority; };
  ASSERT_TRUE(f.source->agent->operations().set_priority("default", "second", 10).is_ok());
  f.world.run_for(f.blocker_ends + 600ms - f.world.clock().now(), 250ms, no_priority);
  EXPECT_EQ(f.phase("second"), model::Phase::kRunning) << "a CANDIDATE asked again carried it";
  EXPECT_NE(f.phase("first"), model::Phase::kRunning);
  // A running copy hears of a later change from the DIGEST.
  ASSERT_TRUE(f.source->agent->operations().set_priority("default", "second", -5).is_ok());
  const std::string uid = f.source->agent->operations().find_workload("default", "second")->uid;
  f.world.run_for(3s, 250ms, no_priority);
  EXPECT_EQ(copy_at(*f.east, uid)->spec.priority, -5);
  // Written down, not only held: the copy keeps it across a restart.
  f.world.restart(*f.east);
  EXPECT_EQ(copy_at(*f.east, uid)->spec.priority, -5);
}

TEST(PriorityTest, OnlyPendingOrRunningWorkloadsMayChangeAndUnknownOnesAreNamed) {
  QueuedAtTarget f;
  EXPECT_EQ(f.source->agent->operations().set_priority("default", "nope", 1).code(),
            ErrorCode::kNotFound);
  f.world.run_for(f.blocker_ends + 1s - f.world.clock().now());
  ASSERT_EQ(f.phase("blocker"), model::Phase::kSucceeded);
  Status finished = f.source->agent->operations().set_priority("default", "blocker", 3);
  EXPECT_EQ(finished.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(finished.message().find("is Succeeded"), std::string::npos) << finished.message();
}

}  // namespace
}  // namespace shoal::core::testing
