// Deterministic simulation (in the manner of FoundationDB's): one source,
// three targets, workloads of every kind, and a seeded schedule of faults —
// partitions in either or both directions, target and source crashes
// between steps and inside them (the open batch rolls back). Every agent
// has its own clock, skewed within maxClockSkew. After
// every step of simulated time the invariants are checked: no workload copy
// holds resources (Bound or Running) on two clusters at once, and each
// agent's own invariants hold (the copies of a group sit on different
// clusters, reservations hold a node per replica). After the
// faults stop, every workload must succeed. A failing seed replays exactly.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "tests/unit/core/world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;

struct Faults {
  std::set<std::string> to_cut;    // messages to these node ids are lost
  std::set<std::string> from_cut;  // messages from these node ids are lost
  bool keeps(const Wire& w) const { return !to_cut.count(w.to) && !from_cut.count(w.from); }
};

// uid -> clusters where it holds resources now.
std::map<std::string, std::vector<std::string>> running_copies(const std::vector<Node*>& nodes) {
  std::map<std::string, std::vector<std::string>> out;
  for (Node* node : nodes) {
    for (const auto& r : node->agent->operations().reservations()) {
      if (r.phase == store::ReservationPhase::kBound || r.phase == store::ReservationPhase::kRunning) {
        out[r.uid].push_back(node->name);
      }
    }
  }
  return out;
}

void run_seed(uint32_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  World world;
  world.configure = [](AgentConfig& config) {
    fast_lifecycle_timers(config);
    config.reservation_ttl = 5s;
  };
  AgentConfig timers;
  fast_lifecycle_timers(timers);
  world.skew_clocks(timers.max_clock_skew, seed);  // each agent its own clock
  Node& source = world.add("source", 1, 500);
  std::vector<Node*> targets = {&world.add("t1", 2), &world.add("t2", 2), &world.add("t3", 2)};
  for (Node* target : targets) world.invite(*target, source);
  world.run_for(2s);

  std::vector<model::WorkloadSpec> specs;
  for (int i = 0; i < 8; ++i) {
    model::WorkloadSpec spec = workload("w" + std::to_string(i),
                                        std::uniform_int_distribution<int64_t>(1, 6)(rng) * 1000,
                                        Duration(std::uniform_int_distribution<int64_t>(2000, 12000)(rng)));
    if (chance(0.3)) spec.restart_policy = model::RestartPolicy::kOnFailure;
    if (i == 0) spec.placement.number_of_clusters = 2;
    if (i == 1) spec.placement.dispatcher = model::Dispatcher::kIncremental, spec.placement.incremental_batch = 1,
                spec.placement.round_timeout = 1s;
    if (i == 2) spec.placement.ready_window = 1s;
    specs.push_back(spec);
  }
  ASSERT_TRUE(source.agent->operations().submit(specs).is_ok());

  std::vector<Node*> everyone = {&source, targets[0], targets[1], targets[2]};
  Faults faults;
  // True while the invariant holds; reports the first violation.
  auto check = [&](const char* when) {
    for (Node* node : everyone) {
      if (!node->agent->broken_invariant().empty()) {
        ADD_FAILURE() << when << ": " << node->name << " breaks its invariants";
        return false;
      }
    }
    for (const auto& [uid, clusters] : running_copies(everyone)) {
      if (clusters.size() > 1) {
        ADD_FAILURE() << when << ": " << uid << " holds resources on " << clusters.front() << " and "
                      << clusters.back();
        return false;
      }
    }
    return true;
  };
  // 60 s of faults, in 250 ms steps.
  for (int step = 0; step < 240; ++step) {
    Node* target = targets[std::uniform_int_distribution<size_t>(0, 2)(rng)];
    if (chance(0.03)) faults.to_cut.insert(target->id);     // source -> target lost
    if (chance(0.03)) faults.from_cut.insert(target->id);   // target -> source lost
    if (chance(0.05)) {                                     // a partition heals
      faults.to_cut.erase(target->id);
      faults.from_cut.erase(target->id);
    }
    if (chance(0.01)) world.restart(*target);
    if (chance(0.005)) world.restart(source);
    // A crash inside a step: its batch is rolled back, what it sent never leaves.
    if (chance(0.01)) target->crash_in_next_step = true;
    if (chance(0.005)) source.crash_in_next_step = true;
    world.run_for(250ms, 250ms, [&](const Wire& w) { return faults.keeps(w); });
    if (!check("under faults")) return;
  }
  // Everything heals; every workload must end Succeeded (all exit 0).
  faults = {};
  for (int step = 0; step < 480; ++step) {
    world.run_for(250ms);
    if (!check("after healing")) return;
  }
  for (const auto& spec : specs) {
    auto record = source.agent->operations().find_workload("default", spec.name);
    ASSERT_TRUE(record.has_value()) << spec.name;
    EXPECT_EQ(record->phase, model::Phase::kSucceeded) << spec.name << ": " << record->reason;
  }
  EXPECT_TRUE(running_copies(everyone).empty());
}

TEST(SimulationTest, SeededFaultSchedulesNeverRunTwoCopiesAndEveryWorkloadSucceeds) {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    run_seed(seed);
    if (::testing::Test::HasFailure()) return;  // one seed's story at a time
  }
}

}  // namespace
}  // namespace shoal::core::testing
