// Preemption across clusters: a target that could fit a candidate only by
// stopping running work offers it (READY with the cost) and stops nothing
// until the source APPROVEs; the source approves room held before any
// offer, then the cheapest offer; the victims are reported Preempted and
// placed again by their source.
#include <gtest/gtest.h>

#include "tests/unit/core/lifecycle_fixture.h"

namespace shoal::core::testing {
namespace {

void preempt_within_queues(model::ClusterSpec& spec) {
  spec.preemption.within_queue = model::PreemptionSpec::WithinQueue::kLowerPriority;
}

int count_phase(Node& node, store::ReservationPhase phase) {
  int count = 0;
  for (const auto& r : node.agent->operations().reservations()) count += r.phase == phase;
  return count;
}

int holding(Node& node) {
  return count_phase(node, store::ReservationPhase::kBound) +
         count_phase(node, store::ReservationPhase::kRunning);
}

// A source that runs nothing itself and three targets of one 4-cpu node
// each, which stop lower-priority work within a queue.
struct ThreeFullTargets {
  ThreeFullTargets() : source(world.add("source", 1, 100)) {
    world.configure = [](AgentConfig& config) { fast_lifecycle_timers(config); };
    for (const char* name : {"t1", "t2", "t3"}) {
      Node& target = world.add(name, 1, 4000, preempt_within_queues);
      targets.push_back(&target);
      world.invite(target, source);
    }
    world.run_for(3s);
  }
  // Fills all three with `count` low-priority 2-cpu jobs that run an hour.
  void fill(int count) {
    std::vector<model::WorkloadSpec> low;
    for (int i = 0; i < count; ++i) low.push_back(workload("low-" + std::to_string(i), 2000, 1h));
    ASSERT_TRUE(source.agent->operations().submit(low).is_ok());
    world.run_for(5s);
  }
  // Submits a 2-cpu workload of priority 100 and lets it place; its record.
  store::WorkloadRecord place_urgent() {
    model::WorkloadSpec urgent = workload("urgent", 2000, 1h);
    urgent.priority = 100;
    EXPECT_TRUE(source.agent->operations().submit({urgent}).is_ok());
    world.run_for(5s);
    auto record = source.agent->operations().find_workload("default", "urgent");
    EXPECT_TRUE(record.has_value());
    return record.value_or(store::WorkloadRecord{});
  }
  int victims() const {
    uint64_t total = 0;
    for (Node* target : targets) total += target->agent->operations().stats().preempted_victims;
    return static_cast<int>(total);
  }
  World world;
  Node& source;
  std::vector<Node*> targets;
};

TEST(PreemptionTest, OnlyTheApprovedTargetPreemptsAndOnlyTheVictimsItNeeded) {
  ThreeFullTargets f;
  f.fill(6);
  for (Node* target : f.targets) ASSERT_EQ(holding(*target), 2) << target->name << " is full";

  store::WorkloadRecord record = f.place_urgent();
  EXPECT_EQ(record.phase, model::Phase::kRunning) << record.reason;
  int preempting_targets = 0;
  for (Node* target : f.targets)
    preempting_targets += target->agent->operations().stats().preemptions > 0;
  EXPECT_EQ(preempting_targets, 1) << "one target preempts; the other offers are cancelled";
  EXPECT_EQ(f.victims(), 1) << "one 2-cpu job makes room for one 2-cpu job";
  for (Node* target : f.targets) EXPECT_LE(holding(*target), 2) << target->name;

  // The victim is Preempted, not Failed by its own doing: its source places
  // it again (it waits, as every cluster is full of work it may not stop).
  int preempted = 0, pending = 0;
  for (int i = 0; i < 6; ++i) {
    auto low = f.source.agent->operations().find_workload("default", "low-" + std::to_string(i));
    ASSERT_TRUE(low.has_value());
    if (low->disruptions > 0) {
      ++preempted;
      EXPECT_TRUE(event_contains(f.source, low->uid, "Preempted")) << low->uid;
      EXPECT_NE(low->phase, model::Phase::kFailed);
      pending += low->phase == model::Phase::kPending;
    }
  }
  EXPECT_EQ(preempted, 1);
  EXPECT_EQ(pending, 1) << "equal priority never preempts equal priority";
}

// The target restarts after it preempted, before its victim's end was
// reported. The victim is stopped again and holds its room until it is
// gone, then is reported Preempted; the preemptor then starts there. Before
// the fix the two were restored in stored order and whichever came second
// was reported LostOnRestart: the victim ran on, or its new copy could start
// elsewhere while the old one was still in its grace period.
TEST(PreemptionTest, ARestartWhileTheVictimStopsLosesNeitherIt) {
  ThreeFullTargets f;
  f.fill(6);
  model::WorkloadSpec urgent = workload("urgent", 2000, 1h);
  urgent.priority = 100;
  ASSERT_TRUE(f.source.agent->operations().submit({urgent}).is_ok());
  f.world.deliver();  // offers, the approval, the preemption: no tick yet reports the victim
  Node* preempting = nullptr;
  for (Node* target : f.targets) {
    if (target->agent->operations().stats().preemptions > 0) preempting = target;
  }
  ASSERT_NE(preempting, nullptr);
  f.world.restart(*preempting);
  f.world.run_for(5s);

  auto record = f.source.agent->operations().find_workload("default", "urgent");
  EXPECT_EQ(record->phase, model::Phase::kRunning) << record->reason;
  EXPECT_EQ(record->cluster, preempting->name);
  EXPECT_FALSE(event_contains(f.source, record->uid, "LostOnRestart"));
  int preempted = 0;
  for (int i = 0; i < 6; ++i) {
    auto low = f.source.agent->operations().find_workload("default", "low-" + std::to_string(i));
    ASSERT_TRUE(low.has_value());
    EXPECT_FALSE(event_contains(f.source, low->uid, "LostOnRestart")) << low->spec.name;
    preempted += low->disruptions > 0 && event_contains(f.source, low->uid, "Preempted");
  }
  EXPECT_EQ(preempted, 1);
  EXPECT_LE(holding(*preempting), 2);
}

TEST(PreemptionTest, RoomHeldWinsOverAnOfferAndNothingIsStopped) {
  ThreeFullTargets f;
  f.fill(5);  // one target keeps 2 cpu free
  EXPECT_EQ(f.place_urgent().phase, model::Phase::kRunning);
  EXPECT_EQ(f.victims(), 0) << "a target with room beats every offer to preempt";
  for (Node* target : f.targets) EXPECT_EQ(holding(*target), 2) << target->name;
}

// Every target is full; the first-ranked would stop two workloads, the
// others one: the cheapest offer wins, though it ranks lower.
TEST(PreemptionTest, TheCheapestOfferWinsOverTheFirstRanked) {
  World world;
  world.configure = [](AgentConfig& config) { fast_lifecycle_timers(config); };
  Node& source = world.add("source", 1, 100);
  Node& big = world.add("big", 1, 8000, preempt_within_queues);
  Node& small1 = world.add("small1", 1, 4000, preempt_within_queues);
  Node& small2 = world.add("small2", 1, 4000, preempt_within_queues);
  for (Node* target : {&big, &small1, &small2}) world.invite(*target, source);
  world.run_for(3s);
  // big holds eight 1-cpu jobs, each small one two 2-cpu jobs.
  std::vector<model::WorkloadSpec> low;
  for (int i = 0; i < 12; ++i) {
    bool at_big = i < 8;
    low.push_back(workload("low-" + std::to_string(i), at_big ? 1000 : 2000, 1h));
    low.back().placement.clusters = at_big ? std::vector<std::string>{"big"}
                                           : std::vector<std::string>{"small1", "small2"};
  }
  ASSERT_TRUE(source.agent->operations().submit(low).is_ok());
  world.run_for(5s);
  ASSERT_EQ(holding(big), 8);
  ASSERT_EQ(holding(small1) + holding(small2), 4);

  model::WorkloadSpec urgent = workload("urgent", 2000, 1h);
  urgent.priority = 100;
  // Ranked by allocatable cpu: big first.
  urgent.placement.prioritizers = {{"ResourceAllocatableCPU", 1}};
  urgent.placement.exact_mode = true;
  ASSERT_TRUE(source.agent->operations().submit({urgent}).is_ok());
  world.run_for(5s);
  auto record = source.agent->operations().find_workload("default", "urgent");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->phase, model::Phase::kRunning) << record->reason;
  EXPECT_NE(record->cluster, "big") << "two victims there, one elsewhere";
  EXPECT_EQ(big.agent->operations().stats().preempted_victims, 0u);
  EXPECT_EQ(small1.agent->operations().stats().preempted_victims +
                small2.agent->operations().stats().preempted_victims,
            1u);
  EXPECT_TRUE(event_contains(source, record->uid, "the cheapest offer"));
}

TEST(PreemptionTest, NoOfferWithoutPreemptionOnOrForAWorkloadThatSaysNever) {
  ThreeFullTargets f;
  f.fill(6);
  model::WorkloadSpec polite = workload("polite", 2000, 1h);
  polite.priority = 100;
  polite.preemption_policy = model::PreemptionPolicy::kNever;
  ASSERT_TRUE(f.source.agent->operations().submit({polite}).is_ok());
  f.world.run_for(5s);
  auto record = f.source.agent->operations().find_workload("default", "polite");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->phase, model::Phase::kPending) << "it waits for room";
  EXPECT_EQ(f.victims(), 0);
}

InvitationOptions guest_terms(bool preemptible, std::optional<int32_t> max_priority = std::nullopt) {
  InvitationOptions options;
  options.namespaces = {"default"};
  options.limits.preemptible = preemptible;
  options.limits.max_priority = max_priority;
  return options;
}

// T lends its idle room to S as a preemptible guest and takes it back for
// its own urgent work; S places what was stopped again elsewhere.
TEST(PreemptionTest, APreemptibleGuestsWorkMakesRoomForTheTargetsOwn) {
  World world;
  world.configure = [](AgentConfig& config) { fast_lifecycle_timers(config); };
  Node& source = world.add("source", 1, 100);
  Node& lender = world.add("lender", 1, 4000, preempt_within_queues);
  Node& other = world.add("other", 1, 4000);
  world.invite(lender, source, guest_terms(/*preemptible=*/true, /*max_priority=*/10));
  world.invite(other, source);
  world.run_for(3s);
  std::vector<model::WorkloadSpec> guests;
  for (int i = 0; i < 4; ++i) {
    guests.push_back(workload("guest-" + std::to_string(i), 2000, 20s));
    guests.back().priority = 50;  // more than the lender grants
  }
  ASSERT_TRUE(source.agent->operations().submit(guests).is_ok());
  world.run_for(3s);
  ASSERT_EQ(holding(lender), 2);
  ASSERT_EQ(holding(other), 2);
  for (const auto& r : lender.agent->operations().reservations()) {
    EXPECT_EQ(r.spec.priority, 10) << "held to the invitation's ceiling at the lender";
  }

  model::WorkloadSpec own = workload("own", 2000, 1h);
  own.priority = 20;
  ASSERT_TRUE(lender.agent->operations().submit({own}).is_ok());
  world.run_for(3s);
  auto record = lender.agent->operations().find_workload("default", "own");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->phase, model::Phase::kRunning) << record->reason;
  EXPECT_EQ(record->cluster, "lender");
  EXPECT_EQ(lender.agent->operations().stats().preempted_victims, 1u)
      << "the fewest guest copies that make room";

  // The stopped copy is placed again once there is room and finishes.
  world.run_for(60s);
  int disrupted = 0;
  for (int i = 0; i < 4; ++i) {
    auto guest = source.agent->operations().find_workload("default", "guest-" + std::to_string(i));
    ASSERT_TRUE(guest.has_value());
    EXPECT_EQ(guest->phase, model::Phase::kSucceeded) << guest->spec.name << ": " << guest->reason;
    disrupted += guest->disruptions;
    EXPECT_EQ(guest->restarts, 0) << "Preempted is not its own failure";
  }
  EXPECT_EQ(disrupted, 1);
}

TEST(PreemptionTest, AGuestNeverStopsTheTargetsOwnWork) {
  World world;
  world.configure = [](AgentConfig& config) { fast_lifecycle_timers(config); };
  Node& source = world.add("source", 1, 100);
  Node& host = world.add("host", 1, 4000, preempt_within_queues);
  world.invite(host, source, guest_terms(/*preemptible=*/false));
  world.run_for(3s);
  ASSERT_TRUE(host.agent->operations().submit({workload("mine", 4000, 1h)}).is_ok());
  world.run_for(2s);
  model::WorkloadSpec urgent = workload("urgent", 2000, 1h);
  urgent.priority = 1000;
  ASSERT_TRUE(source.agent->operations().submit({urgent}).is_ok());
  world.run_for(5s);
  auto record = source.agent->operations().find_workload("default", "urgent");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->phase, model::Phase::kPending);
  EXPECT_EQ(host.agent->operations().stats().preempted_victims, 0u);
  EXPECT_EQ(host.agent->operations().find_workload("default", "mine")->phase,
            model::Phase::kRunning);
}

}  // namespace
}  // namespace shoal::core::testing
