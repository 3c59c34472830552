// Flow control: the source's placement window, acknowledgements
// that hold back resends while a peer works through its backlog, and replay
// marks that take a late envelope within a window.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "agent/core/peer_table.h"
#include "world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;

int placing_without_winner(Node& node) {
  int count = 0;
  for (const auto& record : node.agent->operations().workloads()) {
    count += record.phase == model::Phase::kPlacing && record.winner.empty();
  }
  return count;
}

// Delivers until quiet, keeping back every READY (returned, in order).
std::vector<Wire> deliver_holding_readies(World& world) {
  std::vector<Wire> readies;
  world.deliver([&](const Wire& w) {
    if (w.type != protocol::MessageType::kReady) return true;
    readies.push_back(w);
    return false;
  });
  return readies;
}

// Work waiting in its own cluster's queue sleeps off the timers'
// walk (parked), so a tick costs what is awake, not what is queued; it
// still runs, oldest first, as room frees, and its next round still comes.
TEST(FlowTest, WorkWaitingInItsClustersQueueIsParkedAndStillRunsInOrder) {
  World world;
  Node& solo = world.add("solo", 1, 1000);  // one job at a time
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 40; ++i) specs.push_back(workload("job-" + std::to_string(i), 1000, 1s));
  ASSERT_TRUE(solo.agent->operations().submit(specs).is_ok());
  world.run_for(2s);
  WorkloadCounts counts = solo.agent->operations().workload_counts();
  EXPECT_GE(counts.parked, 35u);
  EXPECT_LE(counts.awake, 3u) << "only the running job and its neighbours are walked";
  world.run_for(50s);
  std::map<std::string, int64_t> started;
  for (const auto& record : solo.agent->operations().workloads()) {
    EXPECT_EQ(record.phase, model::Phase::kSucceeded) << record.spec.name << ": " << record.reason;
    started[record.spec.name] = record.started_at_ms;
  }
  for (int i = 1; i < 40; ++i) {
    EXPECT_LT(started["job-" + std::to_string(i - 1)], started["job-" + std::to_string(i)])
        << "oldest first";
  }
  EXPECT_EQ(solo.agent->operations().workload_counts().parked, 0u);
}

// Fills the one cpu of `source` and of the cluster "target" for `hold`
// with work that may run only there, so that what is submitted next waits
// in both clusters' queues (and is parked at the source).
void fill_source_and_target(World& world, Node& source, Duration hold) {
  model::WorkloadSpec blocker_here = workload("blocker-here", 1000, hold);
  model::WorkloadSpec blocker_there = workload("blocker-there", 1000, hold);
  blocker_here.placement.clusters = {"source"};
  blocker_there.placement.clusters = {"target"};
  ASSERT_TRUE(source.agent->operations().submit({blocker_here, blocker_there}).is_ok());
  world.run_for(2s);
  ASSERT_EQ(phase_of(source, "blocker-here"), model::Phase::kRunning);
  ASSERT_EQ(phase_of(source, "blocker-there"), model::Phase::kRunning);
}

// Work parked in its target's queue is kept in line by sending
// the same epoch's CANDIDATE again (the target restarts its queueHold), not
// by a new round each time: no new epoch, no write, no window slot. 100,000
// queued workloads renewed by rounds kept one agent busy doing only that.
TEST(FlowTest, ParkedWorkKeepsItsPlaceWithTheSameEpochLongPastTheQueueHold) {
  World world;
  Node& source = world.add("source", 1, 1000);  // one job at a time, at each
  Node& target = world.add("target", 1, 1000);
  world.invite(target, source);
  world.run_for(3s);
  ASSERT_NO_FATAL_FAILURE(fill_source_and_target(world, source, 400s));
  // Waits in both clusters' queues: parked.
  ASSERT_TRUE(source.agent->operations().submit({workload("next", 1000, 1s)}).is_ok());
  auto next = source.agent->operations().find_workload("default", "next");
  ASSERT_TRUE(next.has_value());
  int candidates_for_next = 0;
  world.run_for(300s, 250ms, [&](const Wire& w) {
    if (w.type != protocol::MessageType::kCandidate) return true;
    protocol::DropReason reason;
    auto body = protocol::decode_body(w.type, protocol::open(w.bytes, &reason)->body);
    candidates_for_next += std::get<protocol::Candidate>(*body).uid == next->uid;
    return true;
  });
  ASSERT_EQ(phase_of(source, "next"), model::Phase::kPending);
  EXPECT_GE(candidates_for_next, 4) << "renewed while it waits (queueHold is 2 min)";
  next = source.agent->operations().find_workload("default", "next");
  EXPECT_EQ(next->epoch, 1u) << "kept in line by renewals, not new rounds";
  EXPECT_TRUE(source.agent->broken_invariant().empty());
  world.run_for(120s);
  EXPECT_EQ(phase_of(source, "next"), model::Phase::kSucceeded);
  EXPECT_EQ(source.agent->operations().workload_counts().parked, 0u);
  next = source.agent->operations().find_workload("default", "next");
  EXPECT_EQ(next->epoch, 1u);
}

// A renewal answered with a final refusal (here: the target revoked the
// invitation, and the source did not hear of it) takes the workload out of
// that queue's line like any refusal: it is not kept parked on a target
// that no longer queues it.
TEST(FlowTest, ParkedWorkThatItsTargetNowRefusesIsNoLongerParkedThere) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target", 1, 1000);
  InvitationOptions options;
  options.namespaces = {"default"};
  std::string invitation = world.invite(target, source, options);
  world.run_for(3s);
  ASSERT_NO_FATAL_FAILURE(fill_source_and_target(world, source, 900s));
  ASSERT_TRUE(source.agent->operations().submit({workload("next", 1000, 1s)}).is_ok());
  world.run_for(10s);
  ASSERT_EQ(source.agent->operations().workload_counts().parked, 1u);
  ASSERT_TRUE(target.agent->operations().revoke_invitation(invitation, /*evict=*/false).is_ok());
  // Lost: the REVOKE and every CAPACITY after it. Only the renewal's answer
  // can tell the source.
  auto unheard = [&](const Wire& w) {
    return !(w.from == target.id && (w.type == protocol::MessageType::kRevoke ||
                                     w.type == protocol::MessageType::kCapacity));
  };
  world.run_for(200s, 250ms, unheard);
  auto next = source.agent->operations().find_workload("default", "next");
  ASSERT_TRUE(next.has_value());
  EXPECT_NE(next->reason.find("target=Revoked"), std::string::npos) << next->reason;
  EXPECT_EQ(source.agent->operations().workload_counts().parked, 0u);
  EXPECT_TRUE(source.agent->broken_invariant().empty());
}

TEST(FlowTest, AtMostPlacementWindowRoundsAreInFlightAndWaitersGoByPriority) {
  World world;
  world.configure = [](AgentConfig& config) { config.placement_window = 2; };
  Node& source = world.add("source", 1, 100);  // too small for any of the work
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 5; ++i) specs.push_back(workload("job-" + std::to_string(i), 1000, 1s));
  ASSERT_TRUE(source.agent->operations().submit(specs).is_ok());
  model::WorkloadSpec urgent = workload("urgent", 1000, 1s);
  urgent.priority = 10;
  ASSERT_TRUE(source.agent->operations().submit({urgent}).is_ok());
  EXPECT_EQ(placing_without_winner(source), 2);
  int waiting = 0;
  for (const auto& record : source.agent->operations().workloads()) {
    waiting += record.phase == model::Phase::kPending &&
               record.reason.find("WaitingForSlot") != std::string::npos;
  }
  EXPECT_EQ(waiting, 4);
  // Among them: room advertised never walks those waiting for a slot.
  EXPECT_TRUE(source.agent->broken_invariant().empty());

  std::map<std::string, std::string> name_of_uid;
  for (const auto& record : source.agent->operations().workloads())
    name_of_uid[record.uid] = record.spec.name;
  std::vector<std::string> asked;  // in the order the target is asked
  int most_in_flight = 0;
  world.run_for(5s, 250ms, [&](const Wire& w) {
    most_in_flight = std::max(most_in_flight, placing_without_winner(source));
    if (w.type != protocol::MessageType::kCandidate) return true;
    protocol::DropReason reason;
    auto body = protocol::decode_body(w.type, protocol::open(w.bytes, &reason)->body);
    std::string name = name_of_uid[std::get<protocol::Candidate>(*body).uid];
    if (std::find(asked.begin(), asked.end(), name) == asked.end()) asked.push_back(name);
    return true;
  });
  EXPECT_LE(most_in_flight, 2);
  ASSERT_EQ(asked.size(), 6u);
  EXPECT_EQ(asked[0], "job-0");
  EXPECT_EQ(asked[1], "job-1");
  EXPECT_EQ(asked[2], "urgent") << "the higher priority goes first among those waiting";
  EXPECT_EQ(asked[3], "job-2") << "then submission order";
  for (const auto& spec : specs) EXPECT_EQ(phase_of(source, spec.name), model::Phase::kSucceeded);
  EXPECT_EQ(phase_of(source, "urgent"), model::Phase::kSucceeded);
  EXPECT_TRUE(source.agent->broken_invariant().empty());
}

// The winner is the best of the READYs read in one batch, not whichever
// target answered first (one target took nearly every placement).
TEST(FlowTest, ReadiesReadInOneBatchCompeteByScore) {
  SourceAndTwoTargets t("busy", "idle");
  Node& source = t.source;
  Node& busy = t.a;
  World& world = t.world;
  model::WorkloadSpec filler = workload("filler", 8000, 3600s);
  filler.placement.clusters = {"busy"};
  ASSERT_TRUE(source.agent->operations().submit({filler}).is_ok());
  world.run_for(2s);
  ASSERT_EQ(phase_of(source, "filler"), model::Phase::kRunning);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 1000, 1s)}).is_ok());
  std::vector<Wire> readies = deliver_holding_readies(world);
  ASSERT_EQ(readies.size(), 2u);
  std::sort(readies.begin(), readies.end(),
            [&](const Wire& a, const Wire& b) { return a.from == busy.id && b.from != busy.id; });
  world.step(source, [&] {
    for (const Wire& w : readies) EXPECT_EQ(source.agent->handle_wire(w.bytes), 1u);
  });
  world.run_for(3s);
  auto record = source.agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->cluster, "idle")
      << "the busy target answered first, the idle one scored higher";
  EXPECT_EQ(record->phase, model::Phase::kSucceeded);
  EXPECT_TRUE(busy.agent->operations().reservations().size() == 1u)
      << "only the filler is left at busy";
}

// Equally roomy targets whose READYs are read together share the work: a
// tie goes by a hash of (uid, cluster), not always to the first name.
TEST(FlowTest, TiedReadiesReadTogetherAreSpreadOverTheTargets) {
  SourceAndTwoTargets t("a", "b");
  Node& source = t.source;
  World& world = t.world;
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 16; ++i) specs.push_back(workload("job-" + std::to_string(i), 200, 1s));
  ASSERT_TRUE(source.agent->operations().submit(specs).is_ok());
  std::vector<Wire> readies = deliver_holding_readies(world);
  ASSERT_EQ(readies.size(), 32u);
  // One envelope per target: deliver each target's READYs re-joined.
  world.step(source, [&] {
    for (Node* target : {&t.a, &t.b}) {
      std::vector<const Wire*> from_target;
      for (const Wire& w : readies) {
        if (w.from == target->id) from_target.push_back(&w);
      }
      EXPECT_EQ(source.agent->handle_wire(rejoin(from_target, target->identity)), 16u);
    }
  });
  std::map<std::string, int> won;
  for (const auto& record : source.agent->operations().workloads()) ++won[record.cluster];
  EXPECT_GE(won["a"], 3);
  EXPECT_GE(won["b"], 3);
  world.run_for(3s);
  for (const auto& spec : specs) EXPECT_EQ(phase_of(source, spec.name), model::Phase::kSucceeded);
}

TEST(FlowTest, AResendIsHeldWhilePeerReadsOlderTrafficAndReleasedOnceItReadsPastOrStalls) {
  PeerTable peers("self", "here");
  peers.remember("peer", "there", "org", "tcp://there:1");
  TimePoint t0 = from_millis(1'800'000'000'000);
  TimePoint sent = t0 + 500ms;  // our message, sent after traffic the peer is still reading
  uint64_t own_boot = 3;
  auto hold = [&] { return peers.hold_resend_until("peer", sent, 1s); };
  EXPECT_EQ(hold(), TimePoint{}) << "nothing acknowledged yet: not held (the ordinary timer)";
  // The peer acknowledges traffic older than our message at t0+1.4s: still
  // catching up, so a resend waits a stall interval past that progress.
  peers.note_read("peer", own_boot, to_millis(t0 + 300ms), own_boot, t0 + 1400ms);
  EXPECT_EQ(hold(), t0 + 2400ms);
  peers.note_read("peer", own_boot, to_millis(t0 + 400ms), own_boot, t0 + 2200ms);
  EXPECT_EQ(hold(), t0 + 3200ms) << "each progress extends the hold";
  // An acknowledgement of another boot of ours, or an older one, says nothing.
  peers.note_read("peer", own_boot - 1, to_millis(t0 + 450ms), own_boot, t0 + 2500ms);
  peers.note_read("peer", own_boot, to_millis(t0 + 100ms), own_boot, t0 + 2500ms);
  EXPECT_EQ(hold(), t0 + 3200ms);
  // Read past our message: its answer is lost or on its way; not held.
  peers.note_read("peer", own_boot, to_millis(sent), own_boot, t0 + 2600ms);
  EXPECT_EQ(hold(), TimePoint{});
}

TEST(FlowTest, ALateEnvelopeIsTakenOnceWithinTheReplayWindow) {
  PeerTable peers("self", "here");
  peers.remember("peer", "there", "org", "tcp://there:1");
  TimePoint now = from_millis(1'800'000'000'000);
  peers.accept("peer", 5, 100, 0, now);
  EXPECT_TRUE(peers.is_fresh("peer", 5, 101));
  EXPECT_FALSE(peers.is_fresh("peer", 5, 100));
  // 99 was overtaken (an old connection's last envelope after a redial).
  EXPECT_TRUE(peers.is_fresh("peer", 5, 99));
  peers.accept("peer", 5, 99, 0, now);
  EXPECT_FALSE(peers.is_fresh("peer", 5, 99)) << "once only";
  EXPECT_TRUE(peers.is_fresh("peer", 5, 100 - PeerTable::kReplayWindow + 1));
  EXPECT_FALSE(peers.is_fresh("peer", 5, 100 - PeerTable::kReplayWindow)) << "beyond the window";
  peers.accept("peer", 5, 300, 0, now);  // far ahead: the window moves with it
  EXPECT_FALSE(peers.is_fresh("peer", 5, 150));
  EXPECT_TRUE(peers.is_fresh("peer", 5, 299));
  EXPECT_FALSE(peers.is_fresh("peer", 4, 1000)) << "an older boot is over";
  // After a restart only the stored mark is known: everything up to it is a replay.
  PeerTable restarted("self", "here");
  restarted.load({store::PeerRecord{"peer", "there", "org", "tcp://there:1", 5, 300}});
  EXPECT_FALSE(restarted.is_fresh("peer", 5, 299));
  EXPECT_TRUE(restarted.is_fresh("peer", 5, 301));
}

TEST(FlowTest, ASenderIsFoundByItsKeyAsByItsIdWhetherRememberedOrLoaded) {
  crypto::Identity remembered = crypto::Identity::generate();
  crypto::Identity loaded = crypto::Identity::generate();
  crypto::Identity stranger = crypto::Identity::generate();
  std::string remembered_id = crypto::key_to_text(remembered.public_key());
  std::string loaded_id = crypto::key_to_text(loaded.public_key());
  PeerTable peers("self", "here");
  peers.load({store::PeerRecord{loaded_id, "b", "org", "tcp://b:1", 2, 7}});
  peers.remember(remembered_id, "a", "org", "tcp://a:1");
  peers.remember("not-a-key", "c", "org", "tcp://c:1");
  for (const auto& [identity, id] :
       {std::pair{&remembered, remembered_id}, std::pair{&loaded, loaded_id}}) {
    std::optional<PeerTable::Row> by_key = peers.find_row(identity->public_key());
    std::optional<PeerTable::Row> by_id = peers.find_row(id);
    ASSERT_TRUE(by_key.has_value()) << id;
    ASSERT_TRUE(by_id.has_value()) << id;
    EXPECT_EQ(*by_key, *by_id) << "the same row, whichever way it is found";
    EXPECT_EQ((*by_key)->first.text(), id);
  }
  EXPECT_EQ((*peers.find_row(loaded.public_key()))->second.last_seq, 7u);
  EXPECT_FALSE(peers.find_row(stranger.public_key()).has_value()) << "a stranger has no row";
  EXPECT_EQ(peers.broken_invariant(), "");
}

}  // namespace
}  // namespace shoal::core::testing
