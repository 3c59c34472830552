// The core's state transitions, driven by a fake clock, an in-memory network
// and sim clusters (see world.h). No sockets, no sleeps.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "world.h"
#include "agent/core/remote_logs.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;



TEST(AgentTest, LocalWorkloadRunsToSucceeded) {
  World world;
  Node& a = world.add("a");
  auto uids = a.agent->operations().submit({workload("job", 2000, 2s)});
  ASSERT_TRUE(uids.is_ok());
  world.deliver();
  EXPECT_EQ(phase_of(a, "job"), model::Phase::kBound);
  world.run_for(250ms);  // the cluster reports the start at the next tick
  EXPECT_EQ(phase_of(a, "job"), model::Phase::kRunning);
  world.run_for(3s);
  auto record = a.agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kSucceeded);
  EXPECT_EQ(record->cluster, "a");
  EXPECT_GT(record->finished_at_ms, record->started_at_ms);
  EXPECT_TRUE(a.agent->broken_invariant().empty());
  EXPECT_TRUE(a.cluster->check_invariants());
}

TEST(AgentTest, NonZeroExitCodeIsMirroredAsFailed) {
  World world;
  Node& a = world.add("a");
  model::WorkloadSpec spec = workload("crash", 1000, 1s);
  spec.sim.exit_code = 3;
  ASSERT_TRUE(a.agent->operations().submit({spec}).is_ok());
  world.run_for(2s);
  auto record = a.agent->operations().find_workload("default", "crash");
  EXPECT_EQ(record->phase, model::Phase::kFailed);
  EXPECT_EQ(record->exit_code, 3);
}

TEST(AgentTest, FirstReadyWinsAndTheOtherReservationIsCancelled) {
  World world;
  Node& source = world.add("source", 1, 1000);  // too small to take the work itself
  Node& b = world.add("b");
  Node& c = world.add("c");
  world.invite(b, source);
  world.invite(c, source);
  world.run_for(3s);  // HELLO and CAPACITY go around
  auto uids = source.agent->operations().submit({workload("job", 4000, 10s)});
  ASSERT_TRUE(uids.is_ok());
  world.deliver();
  world.run_for(250ms);
  std::string uid = uids->front();
  auto record = source.agent->operations().find_workload("default", "job");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_EQ(bound_copies(b, uid) + bound_copies(c, uid), 1);
  Node& winner = record->cluster == "b" ? b : c;
  Node& loser = record->cluster == "b" ? c : b;
  EXPECT_EQ(bound_copies(winner, uid), 1);
  EXPECT_TRUE(loser.agent->operations().reservations().empty())
      << "the loser released its reservation";
  EXPECT_TRUE(loser.cluster->capacity().free == (model::Resources{32000, int64_t{128} << 30, 0}));
}

// One CANCEL per (workload, epoch, target): a READY that arrives
// after the winner was chosen, from a target that has already been sent a
// CANCEL for that epoch, draws no second one; the pending CANCEL is retried
// on its own timer if lost. (It was a second CANCEL and RELEASED per loser,
// 60 % of the traffic with 8 targets.)
TEST(AgentTest, EachLosingTargetIsCancelledOncePerEpoch) {
  World world;
  Node& source = world.add("source", 1, 1000);  // too small to take the work itself
  std::vector<Node*> targets = {&world.add("b"), &world.add("c"), &world.add("d")};
  for (Node* target : targets) world.invite(*target, source);
  world.run_for(3s);
  std::map<std::string, int> cancels;  // by target
  auto count = [&](const Wire& w) {
    if (w.type == MessageType::kCancel) ++cancels[w.to];
    return true;
  };
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000, 10s)}).is_ok());
  world.deliver(count);  // every target answers READY before any CANCEL arrives
  world.run_for(1s, 250ms, count);
  auto record = source.agent->operations().find_workload("default", "job");
  ASSERT_EQ(record->phase, model::Phase::kRunning);
  int losers = 0;
  for (Node* target : targets) {
    if (target->name == record->cluster) {
      EXPECT_EQ(cancels[target->id], 0) << "the winner";
      continue;
    }
    ++losers;
    EXPECT_EQ(cancels[target->id], 1) << target->name;
    EXPECT_TRUE(target->agent->operations().reservations().empty()) << target->name << " released";
  }
  EXPECT_EQ(losers, 2);
}

TEST(AgentTest, ReservationExpiresWhenSourceNeverApproves) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000)}).is_ok());
  // The source is cut off right after its first CANDIDATE leaves.
  bool candidate_sent = false;
  auto partition = [&](const Wire& w) {
    if (w.from != source.id && w.to != source.id) return true;
    if (w.type == MessageType::kCandidate && !candidate_sent) return candidate_sent = true;
    return false;
  };
  world.deliver(partition);
  ASSERT_EQ(target.agent->operations().reservations().size(), 1u);
  EXPECT_EQ(target.agent->operations().reservations().front().phase,
            store::ReservationPhase::kReserved);
  world.run_for(29s, 1s, partition);
  EXPECT_EQ(target.agent->operations().reservations().size(), 1u) << "held for the TTL";
  world.run_for(2s, 1s, partition);
  EXPECT_TRUE(target.agent->operations().reservations().empty()) << "expired after the TTL";
  EXPECT_EQ(target.cluster->capacity().free.cpu_milli, 32000) << "its resources came back";
}

TEST(AgentTest, LostMessagesAreRetriedUntilAnswered) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  auto uids = source.agent->operations().submit({workload("job", 4000, 2s)});
  ASSERT_TRUE(uids.is_ok());
  // Drop the first of each protocol message type once.
  std::set<MessageType> dropped_once;
  auto lossy = [&](const Wire& w) {
    if (w.type == MessageType::kHello || w.type == MessageType::kCapacity) return true;
    return !dropped_once.insert(w.type).second;
  };
  world.deliver(lossy);
  world.run_for(6s, 250ms, lossy);
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(bound_copies(target, uids->front()), 1);
  EXPECT_TRUE(dropped_once.count(MessageType::kCandidate));
  EXPECT_TRUE(dropped_once.count(MessageType::kApprove));
  EXPECT_TRUE(dropped_once.count(MessageType::kStatus));
}

// A peer that repeats HELLO (a flood, or a confused peer) is greeted back
// once per boot of it: a HELLO must never cost a signed answer each, or one
// invited peer could make the agent sign as fast as it sends.
TEST(AgentTest, RepeatedHellosOfOnePeerBootAreAnsweredOnce) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  target.transport->outbox.clear();
  auto target_key = crypto::key_from_text(target.id, "id");
  ASSERT_TRUE(target_key.is_ok());
  for (uint64_t seq = 1; seq <= 50; ++seq) {
    protocol::Envelope envelope;
    envelope.type = protocol::MessageType::kHello;
    envelope.from = source.identity.public_key();
    envelope.to = *target_key;
    envelope.boot = 1000;  // a new boot of the source
    envelope.seq = seq;
    envelope.sent_at_ms = to_millis(world.clock().now());
    envelope.body = protocol::encode_body(protocol::Hello{"source", "org", "tcp://127.0.0.1:1"});
    world.step(target, [&] { target.agent->handle_wire(protocol::seal(envelope, source.identity)); });
  }
  int answers = 0;
  for (const Wire& w : target.transport->outbox) answers += w.to == source.id;
  EXPECT_GE(answers, 1) << "the new boot is greeted";
  EXPECT_LE(answers, 2) << "a HELLO and a CAPACITY for the boot, not one per HELLO";
}

TEST(AgentTest, DuplicatedDeliveryIsDroppedAsReplay) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  auto uids = source.agent->operations().submit({workload("job", 4000, 1s)});
  std::vector<Wire> copies;
  world.deliver([&](const Wire& w) {
    copies.push_back(w);
    return true;
  });
  uint64_t replayed_before = target.agent->operations()
                                 .stats()
                                 .dropped[static_cast<size_t>(protocol::DropReason::kReplayed)];
  for (const Wire& w : copies) world.find(w.to)->agent->handle_wire(w.bytes);
  EXPECT_GT(target.agent->operations()
                .stats()
                .dropped[static_cast<size_t>(protocol::DropReason::kReplayed)],
            replayed_before);
  world.run_for(2s);
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(bound_copies(target, uids->front()), 1);
}

// Signatures are amortized: what one step sends to a peer leaves
// in one envelope, whatever the number of messages.
TEST(AgentTest, OneStepSendsOneEnvelopePerPeer) {
  SourceAndTwoTargets t("b", "c", 1000);
  World& world = t.world;
  Node& source = t.source;
  Node& b = t.a;
  Node& c = t.b;
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 20; ++i) specs.push_back(workload("job-" + std::to_string(i), 1000, 1s));
  ASSERT_TRUE(source.agent->operations().submit(specs).is_ok());
  std::map<std::string, std::set<uint64_t>> envelopes;  // by recipient
  std::map<std::string, int> candidates;
  for (const Wire& w : source.transport->outbox) {
    envelopes[w.to].insert(w.envelope);
    candidates[w.to] += w.type == MessageType::kCandidate;
  }
  for (Node* target : {&b, &c}) {
    EXPECT_EQ(candidates[target->id], 20) << target->name;
    EXPECT_EQ(envelopes[target->id].size(), 1u) << target->name << ": one signature for the step";
  }
  world.run_for(3s);
  for (const auto& spec : specs) EXPECT_EQ(phase_of(source, spec.name), model::Phase::kSucceeded);
}

// A CAPACITY whose bytes equal the sender's last one is applied from that
// one's decoded body; any other is decoded. Two offers of the same encoded
// size that differ only in one number must both be heard, in either order.
TEST(AgentTest, EveryDifferentCapacityIsHeardEvenWhenItRepeatsOne) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target", 4, 64000);
  world.invite(target, source);
  world.run_for(3s);
  auto source_key = crypto::key_from_text(source.id, "id");
  ASSERT_TRUE(source_key.is_ok());
  uint64_t seq = 0;
  auto advertise = [&](int64_t free_cpu) {
    protocol::NamespaceCapacity ns;
    ns.namespace_name = "default";
    ns.free = {free_cpu, int64_t{1} << 40, 0};
    ns.largest_free_node = {16000, int64_t{1} << 38, 0};
    protocol::Envelope envelope;
    envelope.type = MessageType::kCapacity;
    envelope.from = target.identity.public_key();
    envelope.to = *source_key;
    envelope.boot = 1'000'000;
    envelope.seq = ++seq;
    envelope.sent_at_ms = to_millis(world.clock().now());
    envelope.body = protocol::encode_body(protocol::Capacity{{ns}, std::nullopt});
    size_t handled = 0;
    world.step(source, [&] {
      handled = source.agent->handle_wire(protocol::seal(envelope, target.identity));
    });
    EXPECT_EQ(handled, 1u) << free_cpu;
    return envelope.body.size();
  };
  auto heard_free_cpu = [&]() -> int64_t {
    for (const LiveCluster& cluster :
         source.agent->operations().live_inventory("default", "default")) {
      if (cluster.candidate.name == "target") return cluster.candidate.free.cpu_milli;
    }
    return -1;
  };
  size_t first = advertise(40000);
  EXPECT_EQ(heard_free_cpu(), 40000);
  EXPECT_EQ(advertise(40000), first);
  EXPECT_EQ(heard_free_cpu(), 40000);
  EXPECT_EQ(advertise(30000), first) << "the test needs offers of one encoded size";
  EXPECT_EQ(heard_free_cpu(), 30000);
  advertise(40000);
  EXPECT_EQ(heard_free_cpu(), 40000);
}

// A BATCH is checked message by message: what is unknown, malformed or not
// permitted is dropped alone, the rest is applied, and the envelope's
// (boot, seq) is used once.
TEST(AgentTest, ABatchIsCheckedMessageByMessage) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  auto dropped = [&](protocol::DropReason reason) {
    return target.agent->operations().stats().dropped[static_cast<size_t>(reason)];
  };
  protocol::Envelope envelope;
  envelope.type = MessageType::kBatch;
  envelope.from = source.identity.public_key();
  envelope.to = target.identity.public_key();
  envelope.boot = 1'000'000;
  envelope.seq = 1;
  envelope.sent_at_ms = to_millis(world.clock().now());
  auto item = [](const protocol::Body& body) {
    return protocol::BatchItem{static_cast<uint8_t>(protocol::type_of(body)),
                               protocol::encode_body(body)};
  };
  envelope.body = protocol::encode_batch(std::vector<protocol::BatchItem>{
      item(protocol::Candidate{"uid-1", 1, workload("job", 1000, 1s)}),
      {99, {0x90}},                                                  // unknown type
      {static_cast<uint8_t>(MessageType::kBatch), {0x90}},          // nested BATCH
      {static_cast<uint8_t>(MessageType::kApprove), {0x01}},        // not an APPROVE body
      item(protocol::Ready{"uid-1", 1, 50}),  // a READY from a peer that is no target of ours
  });
  std::vector<uint8_t> wire = protocol::seal(envelope, source.identity);
  uint64_t unknown = dropped(protocol::DropReason::kUnknownType);
  uint64_t bad = dropped(protocol::DropReason::kBadBody);
  uint64_t refused = dropped(protocol::DropReason::kNotPermitted);
  uint64_t received = target.agent->operations().stats().received;
  size_t handled = 0;
  world.step(target, [&] { handled = target.agent->handle_wire(wire); });
  EXPECT_EQ(handled, 1u);
  EXPECT_EQ(target.agent->operations().stats().received, received + 1);
  EXPECT_EQ(dropped(protocol::DropReason::kUnknownType), unknown + 2);
  EXPECT_EQ(dropped(protocol::DropReason::kBadBody), bad + 1);
  EXPECT_EQ(dropped(protocol::DropReason::kNotPermitted), refused + 1);
  ASSERT_EQ(target.agent->operations().reservations().size(), 1u) << "the CANDIDATE was applied";
  EXPECT_EQ(target.agent->operations().reservations().front().uid, "uid-1");

  uint64_t replayed = dropped(protocol::DropReason::kReplayed);
  world.step(target, [&] { handled = target.agent->handle_wire(wire); });
  EXPECT_EQ(handled, 0u);
  EXPECT_EQ(dropped(protocol::DropReason::kReplayed), replayed + 1);
  EXPECT_EQ(target.agent->operations().stats().received, received + 1);
}

TEST(AgentTest, SourceRestartedAfterChoosingWinnerApprovesTheSameWinner) {
  SourceAndTwoTargets t("b", "c", 1000);
  World& world = t.world;
  Node& source = t.source;
  Node& b = t.a;
  Node& c = t.b;
  auto uids = source.agent->operations().submit({workload("job", 4000, 2s)});
  // The source "crashes" after persisting a winner, before APPROVE leaves.
  world.deliver([&](const Wire& w) { return w.type != MessageType::kApprove; });
  auto before = source.agent->operations().find_workload("default", "job");
  ASSERT_FALSE(before->winner.empty());
  source.transport->outbox.clear();
  world.restart(source);
  world.run_for(4s);
  auto after = source.agent->operations().find_workload("default", "job");
  EXPECT_EQ(after->phase, model::Phase::kSucceeded);
  EXPECT_EQ(after->cluster, before->cluster) << "the persisted winner was kept";
  EXPECT_EQ(bound_copies(b, uids->front()) + bound_copies(c, uids->front()), 1);
}

TEST(AgentTest, TargetRestartKeepsRunningWorkAndReportsIt) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000, 5s)}).is_ok());
  world.deliver();
  world.run_for(250ms);
  ASSERT_EQ(phase_of(source, "job"), model::Phase::kRunning);
  world.restart(target);
  EXPECT_EQ(target.cluster->capacity().free.cpu_milli, 28000) << "reservation restored";
  world.run_for(6s);
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(target.cluster->capacity().free.cpu_milli, 32000);
}

TEST(AgentTest, TargetRestartedAfterReadyBindsOnceWhenTheApprovalArrives) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  auto uids = source.agent->operations().submit({workload("job", 4000, 2s)});
  ASSERT_TRUE(uids.is_ok());
  // READY reaches the source; the APPROVE is lost as the target crashes.
  world.deliver([&](const Wire& w) { return w.type != MessageType::kApprove; });
  ASSERT_EQ(target.agent->operations().reservations().size(), 1u);
  world.restart(target);
  EXPECT_EQ(target.cluster->capacity().free.cpu_milli, 28000) << "the reservation survived";
  world.run_for(4s);  // the source re-sends APPROVE; the restored reservation binds
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kSucceeded);
  EXPECT_EQ(bound_copies(target, uids->front()), 1);
  EXPECT_EQ(source.agent->operations().find_workload("default", "job")->epoch, 1u)
      << "no second round";
}

TEST(AgentTest, NamespaceWithoutInvitationGetsNoCandidate) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source, {"ml"});
  world.run_for(3s);
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000)}).is_ok());
  bool candidate_to_target = false;
  world.run_for(2s, 250ms, [&](const Wire& w) {
    candidate_to_target |= w.type == MessageType::kCandidate && w.to == target.id;
    return true;
  });
  EXPECT_FALSE(candidate_to_target);
  auto record = source.agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kPending);
  EXPECT_NE(record->reason.find("target=NamespaceNotInvited"), std::string::npos) << record->reason;
}

TEST(AgentTest, ACapacityNamingOtherNamespacesReplacesTheSourcesView) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source, {"ml"});
  world.run_for(3s);
  auto advertised = [&] {
    std::vector<std::string> names;
    for (const PeerView& peer : source.agent->operations().peers()) {
      if (peer.id != target.id) continue;
      for (const auto& ns : peer.capacity) names.push_back(ns.namespace_name);
    }
    return names;
  };
  ASSERT_EQ(advertised(), std::vector<std::string>{"ml"});
  // A new invitation to the same source replaces the old one: as many
  // namespaces as before, other names.
  world.invite(target, source, {"default"});
  world.run_for(5s);
  EXPECT_EQ(advertised(), std::vector<std::string>{"default"});
  ASSERT_TRUE(source.agent->operations().submit({workload("job", 4000)}).is_ok());
  world.run_for(5s);
  EXPECT_EQ(phase_of(source, "job"), model::Phase::kSucceeded)
      << "placed in the namespace it is now invited into";
}

TEST(AgentTest, MoreWorkThanCapacityWaitsAndAllFinishes) {
  World world;
  Node& a = world.add("a", 2, 8000);
  Node& b = world.add("b", 2, 8000);
  world.invite(a, b);
  world.invite(b, a);
  world.run_for(3s);
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 12; ++i) specs.push_back(workload("job-" + std::to_string(i), 8000, 1s));
  ASSERT_TRUE(a.agent->operations().submit(specs).is_ok());
  world.run_for(20s);
  std::set<std::string> clusters;
  for (const auto& record : a.agent->operations().workloads()) {
    EXPECT_EQ(record.phase, model::Phase::kSucceeded) << record.spec.name << ": " << record.reason;
    clusters.insert(record.cluster);
  }
  EXPECT_EQ(clusters.size(), 2u);
  EXPECT_TRUE(a.cluster->check_invariants());
  EXPECT_TRUE(b.cluster->check_invariants());
  for (const auto& node : a.cluster->nodes()) EXPECT_LE(node.peak_allocated.cpu_milli, 8000);
  for (const auto& node : b.cluster->nodes()) EXPECT_LE(node.peak_allocated.cpu_milli, 8000);
}

// A peer already heard from as a source that later invites us too is then
// heard as a target: its invitations on record are asked anew once the book
// has a new entry (the row's copy of them is not the whole truth forever).
TEST(AgentTest, APeerThatInvitesUsAfterItsFirstEnvelopesIsHeardAsATarget) {
  World world;
  Node& a = world.add("a", 1, 1000);
  Node& b = world.add("b", 2, 8000);
  world.invite(a, b);  // b may send work to a
  world.run_for(3s);   // a has read b's envelopes: b is a source of ours
  world.invite(b, a);  // and now a target too
  world.run_for(5s);
  auto not_permitted = [&] {
    return a.agent->operations()
        .stats()
        .dropped[static_cast<size_t>(protocol::DropReason::kNotPermitted)];
  };
  EXPECT_EQ(not_permitted(), 0u) << "b's CAPACITY refused as if b had never invited us";
  ASSERT_TRUE(a.agent->operations().submit({workload("big", 4000)}).is_ok());  // fits b only
  world.run_for(10s);
  EXPECT_EQ(phase_of(a, "big"), model::Phase::kSucceeded);
  EXPECT_EQ(not_permitted(), 0u);
}

TEST(AgentTest, TargetSchedulerReasonReachesTheSource) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target");
  world.invite(target, source);
  world.run_for(3s);
  model::WorkloadSpec spec = workload("job", 2000);
  spec.queue = "gpu";  // neither cluster has this queue
  ASSERT_TRUE(source.agent->operations().submit({spec}).is_ok());
  world.run_for(1s);
  auto record = source.agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kPending);
  EXPECT_NE(record->reason.find("target=NoSuchQueue:gpu"), std::string::npos) << record->reason;
}

TEST(AgentTest, QueueAtItsDeservedShareWaitsInTheTargetsQueue) {
  World world;
  Node& source = world.add("source", 1, 1000);
  Node& target = world.add("target", 4, 8000, [](model::ClusterSpec& spec) {
    spec.queues = {{"q1", 1}, {"q2", 1}};  // 16 cpu deserved each, no borrowing
  });
  world.invite(target, source);
  world.run_for(3s);
  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 3; ++i) {
    specs.push_back(workload("q1-" + std::to_string(i), 8000, 60s));
    specs.back().queue = "q1";
  }
  specs.push_back(workload("q2-0", 8000, 60s));
  specs.back().queue = "q2";
  ASSERT_TRUE(source.agent->operations().submit(specs).is_ok());
  world.run_for(3s);
  int running_q1 = 0;
  for (const auto& record : source.agent->operations().workloads()) {
    if (record.spec.queue == "q1" && record.phase == model::Phase::kRunning) ++running_q1;
  }
  EXPECT_EQ(running_q1, 2) << "q1 holds its deserved 16 cpu and no more";
  EXPECT_EQ(phase_of(source, "q2-0"), model::Phase::kRunning);
  auto waiting = source.agent->operations().find_workload("default", "q1-2");
  EXPECT_EQ(waiting->phase, model::Phase::kPending);
  EXPECT_NE(waiting->reason.find("target=NoCapacity:QueueDeservedShareReached:q1"), std::string::npos)
      << waiting->reason;
  // The target keeps it queued. When a q1 job finishes (60 s after it
  // started) the target reserves the waiting one and says READY at once;
  // the source's own backoff (5, 10, 20, 40 s) would retry only at ~76 s.
  world.run_for(56s);
  EXPECT_EQ(phase_of(source, "q1-2"), model::Phase::kPending);
  world.run_for(3s);
  EXPECT_EQ(phase_of(source, "q1-2"), model::Phase::kRunning);
  auto events = source.agent->operations().events(waiting->uid);
  ASSERT_TRUE(events.is_ok());
  bool from_queue = std::any_of(events->begin(), events->end(), [](const store::EventRecord& e) {
    return e.text.find("served from its queue") != std::string::npos;
  });
  EXPECT_TRUE(from_queue);
  EXPECT_TRUE(target.cluster->check_invariants());
}

TEST(AgentTest, FreedRoomGoesToQueuedCandidatesInFairShareOrder) {
  // One 4-cpu node, held by the target's own blocker. Source "a" (namespace
  // ns-a, weight 3) queues four 1-cpu jobs first, then "b" (ns-b, weight 1)
  // four more. First come, first served would give a all four freed cpus;
  // the fair-share pass gives a 3 and b 1.
  World world;
  Node& target = world.add("target", 1, 4000, [](model::ClusterSpec& spec) {
    spec.resource_quotas = {{"ns-a", {{"shoal.dev/namespace.weight", "3"}}},
                            {"ns-b", {{"shoal.dev/namespace.weight", "1"}}}};
  });
  Node& a = world.add("a", 1, 500);  // too small for any of its own jobs
  Node& b = world.add("b", 1, 500);
  world.invite(target, a, {"ns-a"});
  world.invite(target, b, {"ns-b"});
  world.run_for(3s);
  ASSERT_TRUE(target.agent->operations().submit({workload("blocker", 4000, 20s, "ns-t")}).is_ok());
  world.run_for(2s);
  ASSERT_EQ(target.agent->operations().find_workload("ns-t", "blocker")->phase,
            model::Phase::kRunning);
  auto jobs = [](const std::string& ns) {
    std::vector<model::WorkloadSpec> specs;
    for (int i = 0; i < 4; ++i) specs.push_back(workload("job-" + std::to_string(i), 1000, 60s, ns));
    return specs;
  };
  ASSERT_TRUE(a.agent->operations().submit(jobs("ns-a")).is_ok());
  world.run_for(1s);
  ASSERT_TRUE(b.agent->operations().submit(jobs("ns-b")).is_ok());
  world.run_for(1s);
  for (Node* source : {&a, &b}) {
    for (const auto& record : source->agent->operations().workloads()) {
      EXPECT_EQ(record.phase, model::Phase::kPending);
      EXPECT_NE(record.reason.find("target=NoCapacity:"), std::string::npos) << record.reason;
      // Its own cluster refused for good (no "NoCapacity:", not queued): a
      // 1-cpu replica never fits a 500m cluster.
      EXPECT_NE(record.reason.find(source->name + "=QueueDeservedShareReached"), std::string::npos)
          << record.reason;
    }
  }
  world.run_for(20s);  // the blocker finishes; queued candidates are served
  auto running = [](Node& source) {
    int n = 0;
    for (const auto& record : source.agent->operations().workloads())
      n += record.phase == model::Phase::kRunning;
    return n;
  };
  EXPECT_EQ(running(a), 3);
  EXPECT_EQ(running(b), 1);
  EXPECT_TRUE(target.cluster->check_invariants());
  for (const auto& node : target.cluster->nodes()) EXPECT_LE(node.peak_allocated.cpu_milli, 4000);
}

TEST(AgentTest, DuplicateWorkloadNameRefusesTheWholeBatch) {
  World world;
  Node& a = world.add("a");
  ASSERT_TRUE(a.agent->operations().submit({workload("one", 1000)}).is_ok());
  auto again = a.agent->operations().submit({workload("two", 1000), workload("one", 1000)});
  ASSERT_FALSE(again.is_ok());
  EXPECT_FALSE(a.agent->operations().find_workload("default", "two").has_value());
}

// A 2 MB label was accepted, and every CANDIDATE then exceeded
// the receivers' frame limit: the workload stayed Placing, saying nothing.
TEST(AgentTest, ASpecTooLargeToSendIsRefusedAtSubmit) {
  World world;
  Node& a = world.add("a");
  model::WorkloadSpec big = workload("big", 1000);
  big.labels["note"] = std::string(2 << 20, 'x');
  auto refused = a.agent->operations().submit({workload("fine", 1000), big});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("default/big: its spec takes"), std::string::npos)
      << refused.status().message();
  EXPECT_FALSE(a.agent->operations().find_workload("default", "fine").has_value())
      << "all or nothing";
  big.labels["note"] = std::string(1000, 'x');
  EXPECT_TRUE(a.agent->operations().submit({big}).is_ok());
}

TEST(AgentTest, InvitationForAnotherKeyIsRefused) {
  World world;
  Node& a = world.add("a");
  Node& b = world.add("b");
  Node& c = world.add("c");
  crypto::IdCard card_b{"b", "org", b.identity.public_key(), "tcp://b:1"};
  auto token = a.agent->operations().create_invitation(card_b.to_string(), {"default"});
  ASSERT_TRUE(token.is_ok());
  auto stolen = c.agent->operations().accept_invitation(*token);
  ASSERT_FALSE(stolen.is_ok());
  EXPECT_EQ(stolen.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(b.agent->operations().accept_invitation(*token).is_ok());
}

}  // namespace
}  // namespace shoal::core::testing

namespace shoal::core {
namespace {

// Answers to LOG_REQUESTs (RemoteLogs): only from the peer asked, once, and
// a peer's error code cannot pass for one of ours.
TEST(RemoteLogsTest, AnAnswerCountsOnlyFromThePeerAskedAndOnlyOnce) {
  RemoteLogs logs;
  protocol::LogRequest request;
  auto id = logs.start("east", request);
  ASSERT_TRUE(id.is_ok());
  EXPECT_EQ(request.request_id, *id);
  EXPECT_FALSE(logs.take(*id).has_value()) << "nothing has come yet";
  logs.on_chunk("mallory", protocol::LogChunk{*id, "", "", "forged", 0, 6, true});
  EXPECT_FALSE(logs.take(*id).has_value()) << "an answer from a peer not asked is ignored";
  logs.on_chunk("east", protocol::LogChunk{*id, "", "", "real", 0, 4, false});
  logs.on_chunk("east", protocol::LogChunk{*id, "", "", "again", 4, 9, false});
  auto answer = logs.take(*id);
  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(answer->is_ok());
  EXPECT_EQ((*answer)->data, "real");
  EXPECT_FALSE(logs.take(*id).has_value()) << "taken once";

  auto second = logs.start("east", request);
  ASSERT_TRUE(second.is_ok());
  logs.on_chunk("east", protocol::LogChunk{*second, "Internal", "boom", "", 0, 0, false});
  answer = logs.take(*second);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(answer->status().message(), "boom");

  // Abandoned, a late answer is ignored; and no more than kMaxInFlight wait.
  auto third = logs.start("east", request);
  ASSERT_TRUE(third.is_ok());
  logs.abandon(*third);
  logs.on_chunk("east", protocol::LogChunk{*third, "", "", "late", 0, 4, true});
  EXPECT_FALSE(logs.take(*third).has_value());
  for (size_t i = 0; i < RemoteLogs::kMaxInFlight; ++i) ASSERT_TRUE(logs.start("east", request).is_ok());
  EXPECT_EQ(logs.start("east", request).status().code(), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace shoal::core
