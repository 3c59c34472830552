// Exactly once under faults: a target or a source frozen past
// its timers, and a group copy re-placed after a sibling finished. Each test
// reproduces a defect found under chaos with real processes.
#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "tests/unit/core/lifecycle_fixture.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;

// A target frozen past its source's lease wakes after its job's sim finish
// time. The copy stopped when the lease ended, so it must not report the
// job Succeeded at the later finish time: the source has placed it again by
// then, and the two copies would have overlapped.
TEST(FaultTest, ATargetFrozenPastItsLeaseStopsTheCopyAtTheLeaseEndNotAtItsFinish) {
  Federation f(2s);
  model::WorkloadSpec spec = workload("job", 4000, 10s);
  std::string uid = f.bind_at_east(spec, 1s);
  ASSERT_FALSE(::testing::Test::HasFailure());

  f.world.freeze(*f.east);
  f.world.run_for(12s);  // past the lease, worker lost, and the job's finish time
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(record->cluster, "west") << "placed again once east was lost";
  auto new_copy = copy_at(*f.west, uid);
  ASSERT_TRUE(new_copy.has_value());

  std::optional<store::ReservationRecord> old_copy;
  f.world.thaw(*f.east, /*read_first=*/true, [&] { old_copy = copy_at(*f.east, uid); });
  ASSERT_TRUE(old_copy.has_value());
  EXPECT_EQ(old_copy->phase, store::ReservationPhase::kFailed);
  EXPECT_EQ(old_copy->message.rfind("LeaseExpired", 0), 0u) << old_copy->message;
  EXPECT_LE(old_copy->finished_at_ms, new_copy->started_at_ms)
      << "the old copy stopped before the new one started";
  EXPECT_FALSE(event_contains(*f.east, uid, "at east: Succeeded"));
  f.world.run_for(3s);
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "west");
  EXPECT_EQ(record->disruptions, 1);
  EXPECT_EQ(record->restarts, 0);
}

// Found by the federation simulator (seed 67): envelopes may
// arrive out of order (a redial; the replay window takes them). A HOLDINGS
// that east sealed before it bound the job, overtaken by the STATUS that
// reported the binding, lists no copy of it. The source must not take that
// old snapshot as proof the copy is gone: placing it again would run the
// job at two clusters at once.
TEST(FaultTest, AHoldingsOvertakenByANewerStatusDoesNotMakeACopyLost) {
  Federation f(2s);
  // Hold back one HOLDINGS from east while nothing of ours is there yet.
  std::vector<uint8_t> early_holdings;
  f.world.run_for(1s, 250ms, [&](const Wire& w) {
    bool holdings = w.from == f.east->id && w.type == protocol::MessageType::kHoldings;
    if (holdings && early_holdings.empty()) {
      early_holdings = w.bytes;
      return false;
    }
    return true;
  });
  ASSERT_FALSE(early_holdings.empty()) << "east answered no DIGEST";
  std::string uid = f.bind_at_east(workload("job", 4000, 3600s), 1s);
  auto bound = f.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(bound->phase, model::Phase::kRunning);

  // Now the old snapshot arrives, after the STATUS that said Running.
  size_t handled = 0;
  f.world.step(*f.source, [&] { handled = f.source->agent->handle_wire(early_holdings); });
  ASSERT_EQ(handled, 1u) << "taken (within the replay window), not dropped";
  f.world.deliver();
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning) << record->reason;
  EXPECT_EQ(record->cluster, "east");
  EXPECT_EQ(record->epoch, bound->epoch) << "no new placement round";
  EXPECT_FALSE(event_contains(*f.source, uid, "LostAtTarget"));
  EXPECT_FALSE(copy_at(*f.west, uid).has_value()) << "never placed a second time";
  f.world.run_for(3s);
  EXPECT_EQ(running_copies(*f.east, uid), 1);
}

// The converse, seen with a real kubelet: a HOLDINGS east sealed while the
// copy still ran, overtaken by the STATUS saying the copy ended (its
// cluster preempted it). The copy is gone; adopting it from the old
// snapshot re-approves a copy that no longer runs, and its second end is
// counted as a second disruption.
TEST(FaultTest, AHoldingsOvertakenByAStatusOfTheCopysEndAdoptsNothing) {
  Federation f(2s);
  std::string uid = f.bind_at_east(workload("job", 4000, 3600s), 1s);
  ASSERT_EQ(phase_of(*f.source, "job"), model::Phase::kRunning);
  uint64_t epoch = f.source->agent->operations().find_workload("default", "job")->epoch;

  // Hold back a HOLDINGS from east that lists the running copy.
  std::vector<uint8_t> running_holdings;
  f.world.run_for(2s, 250ms, [&](const Wire& w) {
    bool holdings = w.from == f.east->id && w.type == protocol::MessageType::kHoldings;
    if (holdings && running_holdings.empty()) {
      running_holdings = w.bytes;
      return false;
    }
    return true;
  });
  ASSERT_FALSE(running_holdings.empty()) << "east answered no DIGEST";

  // The copy ends at east; its STATUS arrives first.
  f.world.step(*f.east, [&] {
    ASSERT_TRUE(f.east->agent->operations().stop_hosted("default", "job", "source").is_ok());
  });
  f.world.deliver();
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(record->disruptions, 1);
  ASSERT_TRUE(record->cluster.empty() || record->epoch != epoch) << "the ended copy is let go";

  size_t handled = 0;
  f.world.step(*f.source, [&] { handled = f.source->agent->handle_wire(running_holdings); });
  ASSERT_EQ(handled, 1u) << "taken (within the replay window), not dropped";
  f.world.deliver();
  EXPECT_FALSE(event_contains(*f.source, uid, "adopting it"));
  f.world.run_for(5s);
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning) << record->reason;
  EXPECT_EQ(record->disruptions, 1) << "one end, counted once";
  EXPECT_NE(record->epoch, epoch) << "placed again in a new round";
  EXPECT_EQ(running_copies(*f.east, uid) + running_copies(*f.west, uid), 1);
}

// A source frozen past workerLostTimeout wakes with its targets' reports
// still unread. It must read them before it calls anyone lost: the job
// finished at east, and placing it again would run it twice.
TEST(FaultTest, ASourceFrozenPastWorkerLostReadsWhatArrivedBeforeCallingATargetLost) {
  Federation f(2s);
  model::WorkloadSpec spec = workload("job", 4000, 1500ms);
  f.bind_at_east(spec);
  ASSERT_FALSE(::testing::Test::HasFailure());

  f.world.freeze(*f.source);
  f.world.run_for(10s);  // the job finishes at east; east keeps reporting it
  f.world.thaw(*f.source, /*read_first=*/false);
  f.world.run_for(5s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kSucceeded) << record->reason;
  EXPECT_EQ(record->cluster, "east");
  EXPECT_EQ(record->restarts + record->disruptions, 0);
  EXPECT_FALSE(copy_at(*f.west, record->uid).has_value()) << "never placed a second time";
}

// numberOfClusters 2 over two targets: copy A finishes while the target of
// copy B is cut off. B is placed again, but never where A ran: the group
// promises N distinct clusters, finished copies included.
TEST(FaultTest, ACopyPlacedAgainNeverLandsWhereAFinishedSiblingRan) {
  Federation f(2s);
  model::WorkloadSpec spec = workload("job", 4000, 3s);
  spec.placement.number_of_clusters = 2;
  ASSERT_TRUE(f.source->agent->operations().submit({spec}).is_ok());
  f.world.run_for(500ms);
  auto group = f.source->agent->operations().find_workload("default", "job");
  ASSERT_EQ(group->phase, model::Phase::kRunning) << group->reason;

  f.cut_east = true;
  for (int step = 0; step < 60; ++step) {  // 15 s in quarter seconds
    f.world.run_for(250ms, 250ms, f.network());
    ASSERT_TRUE(f.source->agent->broken_invariant().empty()) << "at step " << step;
    auto copies = f.source->agent->operations().copies_of(group->uid);
    ASSERT_EQ(copies.size(), 2u);
    ASSERT_TRUE(copies[0].cluster.empty() || copies[0].cluster != copies[1].cluster)
        << "both copies at " << copies[0].cluster << " at step " << step;
  }
  auto copies = f.source->agent->operations().copies_of(group->uid);
  const store::WorkloadRecord& lost = copies[0].cluster == "west" ? copies[1] : copies[0];
  EXPECT_EQ(lost.phase, model::Phase::kPending) << "waits for a cluster without a sibling";
  EXPECT_NE(lost.reason.find("west=HoldsAnotherCopy"), std::string::npos) << lost.reason;

  f.cut_east = false;
  f.world.run_for(10s);
  group = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(group->phase, model::Phase::kSucceeded) << group->reason;
  copies = f.source->agent->operations().copies_of(group->uid);
  std::set<std::string> clusters = {copies[0].cluster, copies[1].cluster};
  EXPECT_EQ(clusters, (std::set<std::string>{"east", "west"}));
}

// Found by the chaos harness (seed 3505726197): a copy given up as lost may
// have run to success where it was, unheard. Copy A runs at a target that
// freezes; copy B is stopped at the other target and keeps away from it for
// a while. A finishes within its lease, is given up as lost and placed again
// where B was. When the frozen target wakes it reports A's old epoch
// Succeeded. B must not be placed there: two copies of the group would have
// succeeded on one cluster.
TEST(FaultTest, ACopyIsNeverPlacedWhereASiblingsLostEpochMayHaveRun) {
  ThreeTargets f;
  Node* west = f.targets[2];
  model::WorkloadSpec filler = workload("filler", 8000, 3600s);
  filler.placement.clusters = {"west"};
  ASSERT_TRUE(f.source->agent->operations().submit({filler}).is_ok());
  f.world.run_for(500ms);
  ASSERT_EQ(phase_of(*f.source, "filler"), model::Phase::kRunning);
  ASSERT_TRUE(f.source->agent->operations().submit({f.job(2, 4000, 2s)}).is_ok());
  f.world.run_for(500ms);
  auto group = f.source->agent->operations().find_workload("default", "job");
  auto copy = [&](const std::string& uid) {
    for (auto& record : f.source->agent->operations().copies_of(group->uid)) {
      if (record.uid == uid) return record;
    }
    ADD_FAILURE() << "no copy " << uid;
    return store::WorkloadRecord{};
  };
  auto copies = f.source->agent->operations().copies_of(group->uid);
  ASSERT_EQ(copies.size(), 2u);
  ASSERT_EQ(copies[0].phase, model::Phase::kRunning);
  ASSERT_EQ(copies[1].phase, model::Phase::kRunning);
  const std::string a_uid = copies[0].uid, b_uid = copies[1].uid;
  Node* a_at = copies[0].cluster == "east" ? f.targets[0] : f.targets[1];
  Node* b_at = a_at == f.targets[0] ? f.targets[1] : f.targets[0];
  ASSERT_EQ(copies[1].cluster, b_at->name);

  f.world.freeze(*a_at);
  ASSERT_TRUE(b_at->agent->operations().stop_hosted("default", "job", "").is_ok());
  f.world.run_for(8s);  // A is given up as lost at ~6 s and placed where B was
  auto a = copy(a_uid);
  ASSERT_EQ(a.cluster, b_at->name) << a.reason;
  ASSERT_GE(a.disruptions, 1);

  f.world.thaw(*a_at, /*read_first=*/true);
  for (int step = 0; step < 40; ++step) {  // 10 s in quarter seconds
    f.world.run_for(250ms);
    ASSERT_TRUE(f.source->agent->broken_invariant().empty()) << "at step " << step;
    ASSERT_NE(copy(b_uid).cluster, a_at->name)
        << "B placed where A's lost epoch succeeded, at step " << step;
  }
  EXPECT_TRUE(event_contains(*f.source, group->uid,
                             "given up as lost had Succeeded; another copy had replaced it"));
  auto b = copy(b_uid);
  EXPECT_EQ(b.phase, model::Phase::kPending) << "nowhere left without a sibling";
  EXPECT_NE(b.reason.find(a_at->name + "=HoldsAnotherCopy"), std::string::npos) << b.reason;

  // Room elsewhere: B runs there and the group ends on two clusters.
  ASSERT_TRUE(f.source->agent->operations().delete_workload("default", "filler").is_ok());
  f.world.run_for(10s);
  group = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(group->phase, model::Phase::kSucceeded) << group->reason;
  EXPECT_EQ(copy(b_uid).cluster, west->name);
  EXPECT_FALSE(copy_at(*a_at, b_uid).has_value()) << "B never reached A's old cluster";
}

// Found by the chaos harness (seed 1): a target frozen past workerLostTimeout
// whose job finished within its lease (the source renews for a while after
// it went silent). The source gave the copy up as lost, but nothing else
// bound it yet when the result arrives: that result is the workload's. Taking
// it as stale and placing the job again ran it, successfully, twice.
TEST(FaultTest, TheOutcomeOfACopyGivenUpAsLostIsKeptIfNothingReplacedIt) {
  Federation f(2s);  // renewals go on 3.5s into east's silence: its lease lasts to 5.5s
  model::WorkloadSpec spec = workload("job", 4000, 4s);
  std::string uid = f.bind_at_east(spec);
  ASSERT_FALSE(::testing::Test::HasFailure());

  f.world.freeze(*f.east);
  f.world.freeze(*f.west);  // nowhere else to go: the new round stays open
  f.world.run_for(8s);      // the job finishes at ~3.5s, within the lease; lost at 6s
  auto record = f.source->agent->operations().find_workload("default", "job");
  ASSERT_FALSE(model::is_finished(record->phase));
  ASSERT_GE(record->disruptions, 1) << "east was given up as lost";

  f.world.thaw(*f.east, /*read_first=*/true);
  f.world.run_for(3s);
  f.world.thaw(*f.west, /*read_first=*/true);
  f.world.run_for(5s);
  record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kSucceeded) << record->reason;
  EXPECT_EQ(record->cluster, "east");
  auto runs = f.east->store->load_runs();
  ASSERT_TRUE(runs.is_ok());
  int succeeded = 0;
  for (const auto& run : *runs) succeeded += run.uid == uid && run.phase == "Succeeded";
  EXPECT_EQ(succeeded, 1) << "the job ran to success once";
  EXPECT_FALSE(copy_at(*f.west, uid).has_value()) << "never placed a second time";
}

// Found by the chaos harness (seed 1): a lease that lapsed is never revived.
// East is frozen past its lease; the source calls it lost and places the
// job at west. Then the source itself pauses, and on waking counts east's
// silence afresh and renews east's lease. East, on waking, must stop its
// copy as of the lapse: its job's finish, after the lapse but within the
// revived lease, would otherwise count, and the two copies overlapped.
TEST(FaultTest, ALeaseThatLapsedIsNotRevivedByALaterRenewal) {
  Federation f(2s);  // renewals go on 3.5s into east's silence; lost after 6s
  model::WorkloadSpec spec = workload("job", 4000, 14s);
  std::string uid = f.bind_at_east(spec);
  ASSERT_FALSE(::testing::Test::HasFailure());

  f.world.freeze(*f.east);
  f.world.run_for(7s);  // east's lease lapsed at ~5.5s; lost at 6s, placed at west
  ASSERT_EQ(f.source->agent->operations().find_workload("default", "job")->cluster, "west");
  auto new_copy = copy_at(*f.west, uid);
  ASSERT_TRUE(new_copy.has_value());

  f.world.freeze(*f.source);
  f.world.run_for(3s);  // longer than heartbeatInterval: the source counts it a pause
  f.world.thaw(*f.source, /*read_first=*/true);  // ...and renews east's lease at once
  f.world.run_for(3s);                           // east's job finishes (at ~14s) meanwhile
  ASSERT_TRUE(f.source->agent->operations().stats().sent > 0);

  f.world.thaw(*f.east, /*read_first=*/true);
  f.world.run_for(1s);
  // The source may have told east to drop its copy meanwhile; the run
  // history keeps how it ended.
  auto runs = f.east->store->load_runs();
  ASSERT_TRUE(runs.is_ok());
  ASSERT_EQ(runs->size(), 1u);
  const store::RunRecord& old_run = runs->front();
  EXPECT_EQ(old_run.phase, "Failed");
  EXPECT_EQ(old_run.message.rfind("LeaseExpired", 0), 0u) << old_run.message;
  EXPECT_LE(old_run.finished_at_ms, new_copy->started_at_ms)
      << "the old copy stopped before the new one started";
}

// A target crashes while binding: APPROVE was applied in memory (the copy
// started) but its batch never committed. Nothing of that step may be
// believed elsewhere: its BOUND never left, it restarts holding only the
// reservation, and the source's retried APPROVE binds the copy once.
TEST(FaultTest, ATargetThatCrashesInsideTheBindingStepBindsOnceAfterItsRestart) {
  Federation f(2s);
  ASSERT_TRUE(f.source->agent->operations().submit({workload("job", 4000, 2s)}).is_ok());
  bool crashed = false;
  int bound_heard_before_restart = 0;
  f.world.run_for(3s, 250ms, [&](const Wire& w) {
    if (!crashed && w.to == f.east->id && w.type == protocol::MessageType::kApprove) {
      f.east->crash_in_next_step = true;  // the step that handles this APPROVE
      crashed = true;
    } else if (crashed && w.from == f.east->id && w.type == protocol::MessageType::kBound &&
               copy_at(*f.east, f.source->agent->operations().find_workload("default", "job")->uid)
                       ->phase == store::ReservationPhase::kReserved) {
      ++bound_heard_before_restart;  // a BOUND while east holds only a reservation
    }
    return true;
  });
  ASSERT_TRUE(crashed) << "east never got an APPROVE";
  EXPECT_EQ(bound_heard_before_restart, 0);
  f.world.run_for(6s);
  auto record = f.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kSucceeded) << record->reason;
  EXPECT_EQ(record->restarts + record->disruptions, 0);
  int runs_of_job = 0;  // from the targets' durable run history
  for (Node* node : {f.east, f.west}) {
    auto runs = node->store->load_runs();
    ASSERT_TRUE(runs.is_ok());
    for (const auto& run : *runs) runs_of_job += run.uid == record->uid;
  }
  EXPECT_EQ(runs_of_job, 1) << "ran exactly once";
}

// Write-ahead for effects: the copy an APPROVE binds is launched
// on the cluster only after the batch holding its Bound row commits. Inside
// the binding step the cluster has started nothing (a started copy makes
// next_event_at() due at once); right after the commit it has.
TEST(FaultTest, ACopyIsLaunchedOnlyAfterTheBatchThatBindsItCommits) {
  Federation f(2s);
  ASSERT_TRUE(f.source->agent->operations().submit({workload("job", 4000, 2s)}).is_ok());
  std::optional<Wire> approve;
  for (int i = 0; i < 8 && !approve; ++i) {
    f.world.run_for(250ms, 250ms, [&](const Wire& w) {
      if (w.to != f.east->id) return true;
      // The APPROVE is delivered by hand below; what follows it to east is
      // held back, or the APPROVE would arrive as a replay.
      if (!approve && w.type == protocol::MessageType::kApprove) approve = w;
      return !approve;
    });
  }
  ASSERT_TRUE(approve.has_value()) << "east never got an APPROVE";
  std::string uid = f.source->agent->operations().find_workload("default", "job")->uid;
  bool started_inside_the_step = true;
  f.world.step(*f.east, [&] {
    f.east->agent->handle_wire(approve->bytes);
    EXPECT_EQ(copy_at(*f.east, uid)->phase, store::ReservationPhase::kBound);
    started_inside_the_step = f.east->cluster->next_event_at() == TimePoint::min();
  });
  EXPECT_FALSE(started_inside_the_step) << "launched before its Bound row was committed";
  EXPECT_EQ(f.east->cluster->next_event_at(), TimePoint::min()) << "not launched after the commit";
  f.world.run_for(4s);
  EXPECT_EQ(phase_of(*f.source, "job"), model::Phase::kSucceeded);
}

// East chosen for a job, then silent: the source stops sending it APPROVEs
// once east has been silent too long to renew, before it is lost.
struct SilentWinner {
  World world;
  Node* source;
  Node* east;
  int approves = 0;
  bool east_silent = true;
  SilentWinner() {
    world.configure = [](AgentConfig& config) {
      fast_lifecycle_timers(config);
      // Renewable while silent for less than 10 s - 3 s - 0.5 s = 6.5 s,
      // so that an APPROVE resend (1, 2, 4 s apart) finds east past it
      // before east is lost.
      config.lease = 3s;
      config.worker_lost_timeout = 10s;
    };
    source = &world.add("source", 1, 500);
    east = &world.add("east");
    Node& west = world.add("west", 2);
    world.invite(*east, *source);
    world.invite(west, *source);
    world.run_for(2s);
  }
  std::function<bool(const Wire&)> network() {
    return [this](const Wire& w) {
      if (w.from == source->id && w.to == east->id && w.type == protocol::MessageType::kApprove) {
        ++approves;
      }
      return approves == 0 || !east_silent || w.from != east->id;  // silent once chosen
    };
  }
  void choose_east_and_fall_silent() {
    ASSERT_TRUE(source->agent->operations().submit({workload("job", 4000, 3600s)}).is_ok());
    for (int step = 0; step < 20 && approves == 0; ++step) world.run_for(250ms, 250ms, network());
    ASSERT_GT(approves, 0) << "east was never chosen";
    world.run_for(5s, 250ms, network());
    int approves_before = approves;
    world.run_for(2250ms, 250ms, network());  // a resend was due in here; east is silent 7 s
    auto record = source->agent->operations().find_workload("default", "job");
    ASSERT_EQ(record->phase, model::Phase::kPlacing) << record->reason;
    ASSERT_EQ(approves, approves_before) << "an APPROVE went to a winner silent too long to renew";
  }
};

// A winner silent too long to renew its lease is sent no APPROVE. A pause
// of the source restarts every peer's silence (PeerTable::notice_tick), so
// the APPROVE it is owed goes again at once. Nothing about the workload
// changed: the source role must be told (silences_restarted), or its
// timers, which visit a workload when its key comes, would not until the
// workload changes.
TEST(FaultTest, AnApproveHeldForASilentWinnerGoesAgainWhenAPauseRestartsEverySilence) {
  SilentWinner f;
  f.choose_east_and_fall_silent();
  ASSERT_FALSE(::testing::Test::HasFailure());
  World& world = f.world;
  Node& source = *f.source;
  Node& east = *f.east;
  auto network = f.network();
  world.freeze(source);
  world.run_for(2500ms, 250ms, network);  // longer than a heartbeat; east not yet lost
  bool approve_on_waking = false;
  world.thaw(source, /*read_first=*/false, [&] {
    for (const Wire& w : source.transport->outbox) {
      approve_on_waking |= w.to == east.id && w.type == protocol::MessageType::kApprove;
    }
  });
  EXPECT_TRUE(approve_on_waking) << "east's silence counts from the pause's end: renewable again";
  EXPECT_TRUE(source.agent->broken_invariant().empty());
}

// The same held APPROVE goes again as soon as east is heard from: hearing
// from a winner changes nothing in the workload, so the source role is told
// (heard_from touches what that winner won).
TEST(FaultTest, AnApproveHeldForASilentWinnerGoesAgainWhenItIsHeardFrom) {
  SilentWinner f;
  f.choose_east_and_fall_silent();
  ASSERT_FALSE(::testing::Test::HasFailure());
  int approves_before = f.approves;
  f.east_silent = false;
  // Within a retry interval: east reads what it missed first (flow control).
  f.world.run_for(1250ms, 250ms, f.network());
  EXPECT_GT(f.approves, approves_before) << "east is renewable again once heard from";
  f.world.run_for(1s, 250ms, f.network());
  EXPECT_EQ(f.source->agent->operations().find_workload("default", "job")->phase,
            model::Phase::kRunning);
}

}  // namespace
}  // namespace shoal::core::testing
