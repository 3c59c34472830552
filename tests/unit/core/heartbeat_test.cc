// Heartbeats and CAPACITY: what each link carries when nothing else does,
// and when a source hears of room taken and freed (Router::send_heartbeats,
// TargetRole::advertise_capacity).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

// Every envelope delivered on one link (from → to), by world time, and the
// messages it carried by type.
struct LinkLog {
  std::vector<TimePoint> envelopes;
  std::map<MessageType, int> messages;
  std::set<uint64_t> seen;  // envelope ids
  void note(const Wire& w, TimePoint at) {
    ++messages[w.type];
    if (seen.insert(w.envelope).second) envelopes.push_back(at);
  }
  Duration longest_gap() const {
    Duration longest{0};
    for (size_t i = 1; i < envelopes.size(); ++i) {
      longest = std::max(longest, envelopes[i] - envelopes[i - 1]);
    }
    return longest;
  }
};

// A source and a target it is invited by, settled, and a log of each
// direction of their link for `record` to fill.
struct WatchedLink {
  explicit WatchedLink(int64_t source_cpu_milli)
      : source(world.add("source", 1, source_cpu_milli)), target(world.add("target")) {
    world.invite(target, source);
    world.run_as_runtime_for(5s);
  }
  // A `keep` for World::deliver and run_as_runtime_for: logs, drops nothing.
  std::function<bool(const Wire&)> record() {
    return [this](const Wire& w) {
      if (w.from == source.id && w.to == target.id) to_target.note(w, world.clock().now());
      if (w.from == target.id && w.to == source.id) to_source.note(w, world.clock().now());
      return true;
    };
  }
  World world;
  Node& source;
  Node& target;
  LinkLog to_target, to_source;
};

// The free cpu a CAPACITY message tells for "default" (none if absent).
std::optional<int64_t> advertised_free_cpu(const Wire& w) {
  if (w.type != MessageType::kCapacity) return std::nullopt;
  protocol::DropReason reason;
  auto envelope = protocol::open(w.bytes, &reason);
  if (!envelope.is_ok()) return std::nullopt;
  auto body = protocol::decode_body(MessageType::kCapacity, envelope->body);
  if (!body.is_ok()) return std::nullopt;
  for (const auto& ns : std::get<protocol::Capacity>(*body).namespaces) {
    if (ns.namespace_name == "default") return ns.free.cpu_milli;
  }
  return std::nullopt;
}

// With nothing to place, each direction of a link carries one envelope per
// heartbeat interval (2 s): a source's HELLO, a target's CAPACITY and
// HELLO by turns. Heartbeat passes run every half interval, ticks wake a
// little late as a real loop does, and still no pass sends twice as often,
// nor does any link go silent for longer than an interval.
TEST(HeartbeatTest, AnIdleLinkCarriesOneEnvelopeEachWayPerInterval) {
  WatchedLink link(1000);
  LinkLog& to_target = link.to_target;
  LinkLog& to_source = link.to_source;
  link.world.run_as_runtime_for(20s, 3ms, link.record());
  for (auto [name, log] :
       {std::pair{"source to target", &to_target}, std::pair{"target to source", &to_source}}) {
    SCOPED_TRACE(name);
    EXPECT_GE(log->envelopes.size(), 9u);
    EXPECT_LE(log->envelopes.size(), 11u) << "one per interval, not one per pass";
    EXPECT_LE(log->longest_gap(), 2s + 50ms) << "never silent for longer than an interval";
  }
  // CAPACITY every other interval (it is pushed when it changes), a HELLO
  // in the interval between.
  EXPECT_GE(to_source.messages[MessageType::kCapacity], 4) << "at least every other interval";
  EXPECT_LE(to_source.messages[MessageType::kCapacity], 6) << "not every interval";
  EXPECT_GE(to_source.messages[MessageType::kHello], 4) << "a HELLO in between";
  EXPECT_EQ(to_target.messages[MessageType::kCapacity], 0);
}

// A link that carries protocol messages needs no HELLO on top: a source
// that sends a CANDIDATE more often than every half interval greets the
// target with nothing else, and the target, whose jobs end as often (each
// end is a CAPACITY to its sources at once), sends no HELLO either. Yet
// neither direction is ever silent for longer than an interval.
TEST(HeartbeatTest, ABusyLinkCarriesNoHello) {
  WatchedLink link(100);
  World& world = link.world;
  Node& source = link.source;
  LinkLog& to_target = link.to_target;
  LinkLog& to_source = link.to_source;
  auto record = link.record();
  for (int i = 0; i < 40; ++i) {  // a 1-second job every 400 ms, for 16 s
    world.step(source, [&] {
      ASSERT_TRUE(source.agent->operations()
                      .submit({workload("job-" + std::to_string(i), 1000, 1s)})
                      .is_ok());
    });
    world.deliver(record);
    world.run_as_runtime_for(400ms, 3ms, record);
  }
  world.run_as_runtime_for(3s, 3ms, record);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(phase_of(source, "job-" + std::to_string(i)), model::Phase::kSucceeded) << i;
  }
  // The first pass after the settling may still greet once.
  EXPECT_LE(to_target.messages[MessageType::kHello], 1) << "CANDIDATEs and APPROVEs said it";
  EXPECT_LE(to_source.messages[MessageType::kHello], 1) << "READYs, STATUSes and CAPACITY said it";
  EXPECT_GE(to_source.messages[MessageType::kCapacity], 40) << "each end told at once";
  EXPECT_LE(to_target.longest_gap(), 2s + 50ms);
  EXPECT_LE(to_source.longest_gap(), 2s + 50ms);
}

// Room taken by a reservation reaches the other sources by the target's
// next tick (at most half an interval), not at once: most reservations of
// an AllAtOnce round are released within a round trip, and then neither
// needs telling. Room freed reaches every source in the step that freed it.
TEST(HeartbeatTest, TakenRoomIsAdvertisedByTheNextTickAndFreedRoomAtOnce) {
  World world;
  Node& first = world.add("first", 1, 100);
  Node& second = world.add("second", 1, 100);
  Node& target = world.add("target", 1, 8000);
  world.invite(target, first);
  world.invite(target, second);
  world.run_as_runtime_for(5s);
  std::vector<std::pair<TimePoint, int64_t>> heard_by_second;  // (when, free cpu)
  auto record = [&](const Wire& w) {
    if (w.from == target.id && w.to == second.id) {
      if (auto free = advertised_free_cpu(w))
        heard_by_second.push_back({world.clock().now(), *free});
    }
    return true;
  };
  // The target reserves; its READY waits at the frozen source.
  world.step(first, [&] {
    ASSERT_TRUE(first.agent->operations().submit({workload("job", 6000, 3s)}).is_ok());
  });
  world.freeze(first);
  world.deliver(record);
  ASSERT_EQ(target.agent->operations().reservations().size(), 1u);
  TimePoint reserved_at = world.clock().now();
  EXPECT_GT(target.agent->next_deadline(), target.clock->now())
      << "room taken wakes no tick of its own";
  EXPECT_TRUE(heard_by_second.empty());
  world.run_as_runtime_for(1s + 10ms, 3ms, record);
  ASSERT_FALSE(heard_by_second.empty()) << "a tick within half an interval tells it";
  EXPECT_EQ(heard_by_second.front().second, 2000) << "8 cpu less the job's 6";
  EXPECT_LE(heard_by_second.front().first - reserved_at, 1s + 10ms);

  // Approved, run, ended: the CAPACITY that frees its room leaves in the
  // step that saw the job end, with the STATUS that tells the source.
  world.thaw(first, /*read_first=*/true);
  world.deliver(record);
  size_t heard_before_end = heard_by_second.size();
  TimePoint ended_by = world.clock().now();
  for (int i = 0; i < 1000 && phase_of(first, "job") != model::Phase::kSucceeded; ++i) {
    ended_by = world.clock().now();
    world.run_as_runtime_for(5ms, 1ms, record);
  }
  ASSERT_EQ(phase_of(first, "job"), model::Phase::kSucceeded);
  bool told = false;
  for (size_t i = heard_before_end; i < heard_by_second.size(); ++i) {
    if (heard_by_second[i].second == 8000) {
      told = true;
      EXPECT_LE(heard_by_second[i].first - ended_by, 10ms) << "at once, not at the next pass";
    }
  }
  EXPECT_TRUE(told) << "the other source hears the room come back";
}

// A shared backend (Slurm) whose own users take room and give it back:
// nothing runs through it here, it only reports their room.
class LocalUsersRunner final : public cluster::Runner {
 public:
  std::map<std::string, model::Resources> taken;
  Status launch(const cluster::LaunchRequest&) override { return Status::ok(); }
  bool stop(const std::string&, Duration) override { return true; }
  std::vector<cluster::WorkloadEvent> observe(TimePoint) override { return {}; }
  TimePoint next_event_at() const override { return TimePoint::max(); }
  void forget(const std::string&) override {}
  std::string describe(const std::string&) const override { return ""; }
  Result<cluster::LogChunk> read_log(const std::string&, int, int64_t, size_t) const override {
    return not_found("none");
  }
  std::map<std::string, model::Resources> room_taken_by_others() const override { return taken; }
};

// The CAPACITY pass reuses an offer while nothing it is computed from has
// changed. Room taken by the backend's own users changes no count of the
// agent's and comes from no step of its own: only the cluster's capacity
// version says so. The source still hears of it by the next passes, and
// of its return.
TEST(HeartbeatTest, RoomTakenAndGivenBackByTheBackendsOwnUsersIsAdvertised) {
  World world;
  LocalUsersRunner* users = nullptr;
  world.runner_for = [&](const std::string& name) -> std::unique_ptr<cluster::Runner> {
    if (name != "target") return nullptr;
    auto runner = std::make_unique<LocalUsersRunner>();
    users = runner.get();
    return runner;
  };
  Node& source = world.add("source", 1, 100);
  Node& target = world.add("target", 1, 8000);
  world.invite(target, source);
  ASSERT_NE(users, nullptr);
  world.run_as_runtime_for(5s);
  std::vector<int64_t> heard;  // free cpu, in the order told
  auto record = [&](const Wire& w) {
    if (w.from == target.id && w.to == source.id) {
      if (auto free = advertised_free_cpu(w)) heard.push_back(*free);
    }
    return true;
  };
  users->taken = {{"node-0", {6000, 0, 0}}};
  world.run_as_runtime_for(5s, 3ms, record);
  ASSERT_FALSE(heard.empty());
  EXPECT_EQ(heard.back(), 2000) << "8 cpu less the 6 its users took";
  heard.clear();
  users->taken.clear();
  world.run_as_runtime_for(5s, 3ms, record);
  ASSERT_FALSE(heard.empty());
  EXPECT_EQ(heard.back(), 8000) << "the room given back";
}

// An AllAtOnce round reserves at every target and releases at the losers
// within a round trip. A loser whose reservation no other source heard of
// tells them nothing when it releases it: their view of it never changed,
// and none of them was refused meanwhile.
TEST(HeartbeatTest, AReservationReleasedBeforeAnyoneHeardOfItIsNotAdvertised) {
  World world;
  Node& source = world.add("source", 1, 100);
  Node& observer = world.add("observer", 1, 100);
  Node& one = world.add("one", 1, 8000);
  Node& two = world.add("two", 1, 8000);
  for (Node* target : {&one, &two}) {
    world.invite(*target, source);
    world.invite(*target, observer);
  }
  world.run_as_runtime_for(5s);
  // The whole round in one delivery: CANDIDATEs, READYs, one APPROVE, one
  // CANCEL; no target ticks in between.
  world.step(source, [&] {
    ASSERT_TRUE(source.agent->operations().submit({workload("job", 6000, 60s)}).is_ok());
  });
  world.deliver();
  int reservations = 0;
  Node* loser = nullptr;
  for (Node* target : {&one, &two}) {
    int held = static_cast<int>(target->agent->operations().reservations().size());
    reservations += held;
    if (held == 0) loser = target;
  }
  ASSERT_EQ(reservations, 1) << "one bound, one released";
  ASSERT_NE(loser, nullptr);
  ASSERT_LE(loser->agent->next_deadline(), loser->clock->now()) << "the release wakes a tick";
  loser->transport->outbox.clear();
  world.step(*loser, [&] { World::tick_until_idle(*loser); });
  for (const Wire& w : loser->transport->outbox) {
    EXPECT_FALSE(w.to == observer.id && w.type == MessageType::kCapacity)
        << "the observer's view of " << loser->name << " did not change";
  }
}

// The other side of the test above: a source whose CANDIDATE was refused
// while the room was taken believed the work fits, so it hears of the room
// freed at once, even though our numbers are back where its view has them.
TEST(HeartbeatTest, ASourceRefusedWhileRoomWasTakenHearsOfTheRoomFreedAtOnce) {
  World world;
  Node& holder = world.add("holder", 1, 100);
  Node& refused = world.add("refused", 1, 100);
  Node& target = world.add("target", 1, 8000);
  world.invite(target, holder);
  world.invite(target, refused);
  world.run_as_runtime_for(5s);
  // The holder's CANDIDATE takes the room; its READY is lost, so the
  // reservation waits for an APPROVE. No tick of the target tells anyone.
  world.step(holder, [&] {
    ASSERT_TRUE(holder.agent->operations().submit({workload("big", 6000, 60s)}).is_ok());
  });
  world.deliver([&](const Wire& w) { return w.from != target.id; });
  std::vector<store::ReservationRecord> held = target.agent->operations().reservations();
  ASSERT_EQ(held.size(), 1u) << "the room is taken";
  // The other source still sees 8 cpu free: its CANDIDATE is refused
  // (NoCapacity; it waits in the target's queue), and then withdrawn.
  world.step(refused, [&] {
    ASSERT_TRUE(refused.agent->operations().submit({workload("also", 6000, 60s)}).is_ok());
  });
  world.deliver([&](const Wire& w) { return w.from != target.id; });
  ASSERT_EQ(target.agent->operations().reservations().size(), 1u) << "no room for the second";
  auto also = refused.agent->operations().find_workload("default", "also");
  ASSERT_TRUE(also.has_value());
  std::vector<uint8_t> withdraw =
      forge(refused, target, protocol::Cancel{also->uid, also->epoch}, 1, refused.clock->now());
  world.step(target, [&] { target.agent->handle_wire(withdraw); });
  // The holder gives its reservation up: the room, and every number the
  // target advertises, are back where both sources last saw them.
  std::vector<uint8_t> cancel =
      forge(holder, target, protocol::Cancel{held[0].uid, held[0].epoch}, 1, holder.clock->now());
  world.step(target, [&] { target.agent->handle_wire(cancel); });
  ASSERT_TRUE(target.agent->operations().reservations().empty() ||
              !store::holds_resources(target.agent->operations().reservations()[0].phase))
      << "released";
  target.transport->outbox.clear();
  world.step(target, [&] { World::tick_until_idle(target); });
  bool told_refused = false, told_holder = false;
  for (const Wire& w : target.transport->outbox) {
    if (w.type != MessageType::kCapacity) continue;
    told_refused |= w.to == refused.id;
    told_holder |= w.to == holder.id;
  }
  EXPECT_TRUE(told_refused) << "refused a CANDIDATE that fit its view: told of the room freed";
  EXPECT_FALSE(told_holder) << "the holder's view did not change and nothing was refused it";
}

}  // namespace
}  // namespace shoal::core::testing
