// Dispatchers: who hears of a workload, and when.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/core/world.h"

namespace shoal::core::testing {
namespace {

using namespace std::chrono_literals;
using protocol::MessageType;

// A source whose own cluster takes nothing, and five targets t1..t5 that
// invite it. t1 and t2 are the biggest (ranked first by free cpu) but have
// no node labelled pool=gpu; t3..t5 have one.
struct Fleet {
  World world;
  Node* source = nullptr;
  std::vector<Node*> targets;

  Fleet() {
    source = &world.add("source", 1, 100);
    for (int i = 1; i <= 5; ++i) {
      bool big = i <= 2;
      Node& target = world.add("t" + std::to_string(i), big ? 8 : 2, 8000, [&](model::ClusterSpec& spec) {
        if (!big) spec.nodes[0].labels["pool"] = "gpu";
      });
      world.invite(target, *source);
      targets.push_back(&target);
    }
    world.run_for(3s);
  }

  std::string name_of(const std::string& id) {
    for (Node* t : targets) {
      if (t->id == id) return t->name;
    }
    return "?";
  }

  // Runs `total` in steps of 250 ms; the targets CANDIDATEs went to, in
  // the order sent. `deliver` (everything when null) says what arrives.
  std::vector<std::string> run_asking(Duration total,
                                      const std::function<bool(const Wire&)>& deliver = nullptr) {
    std::vector<std::string> asked;
    world.run_for(total, 250ms, [&](const Wire& w) {
      if (w.type == MessageType::kCandidate) asked.push_back(name_of(w.to));
      return !deliver || deliver(w);
    });
    return asked;
  }
};

std::set<std::string> distinct(const std::vector<std::string>& names) {
  return {names.begin(), names.end()};
}

model::WorkloadSpec gpu_job(model::Dispatcher dispatcher) {
  model::WorkloadSpec spec = workload("job", 1000, 60s);
  spec.node_selector["pool"] = "gpu";
  spec.placement.dispatcher = dispatcher;
  spec.placement.incremental_batch = 2;
  return spec;
}

TEST(DispatcherTest, SampleContactsOnlyTheDTimesNBestRanked) {
  Fleet fleet;
  model::WorkloadSpec spec = workload("job", 1000, 60s);
  spec.placement.dispatcher = model::Dispatcher::kSample;  // d = 2, N = 1
  ASSERT_TRUE(fleet.source->agent->operations().submit({spec}).is_ok());
  EXPECT_EQ(distinct(fleet.run_asking(2s)), (std::set<std::string>{"t1", "t2"})) << "the two roomiest";
  EXPECT_EQ(fleet.source->agent->operations().find_workload("default", "job")->phase,
            model::Phase::kRunning);
}

TEST(DispatcherTest, IncrementalAsksTheNextBatchWhenTheFirstAllRejects) {
  Fleet fleet;
  ASSERT_TRUE(
      fleet.source->agent->operations().submit({gpu_job(model::Dispatcher::kIncremental)}).is_ok());
  std::vector<std::string> asked = fleet.run_asking(2s);
  ASSERT_GE(asked.size(), 4u);
  EXPECT_EQ(std::set<std::string>(asked.begin(), asked.begin() + 2), (std::set<std::string>{"t1", "t2"}));
  EXPECT_EQ(std::set<std::string>(asked.begin() + 2, asked.begin() + 4), (std::set<std::string>{"t3", "t4"}));
  EXPECT_EQ(std::count(asked.begin(), asked.end(), "t5"), 0) << "bound before t5 was needed";
  auto record = fleet.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_TRUE(record->cluster == "t3" || record->cluster == "t4") << record->cluster;
}

TEST(DispatcherTest, IncrementalAsksMoreAfterTheRoundTimeoutWhenNobodyAnswers) {
  Fleet fleet;
  model::WorkloadSpec spec = workload("job", 1000, 60s);
  spec.placement.dispatcher = model::Dispatcher::kIncremental;
  spec.placement.incremental_batch = 2;
  spec.placement.round_timeout = 2s;
  ASSERT_TRUE(fleet.source->agent->operations().submit({spec}).is_ok());
  // t1 and t2 are unresponsive: whatever is sent to them is lost.
  auto lossy = [&](const Wire& w) { return fleet.name_of(w.to) != "t1" && fleet.name_of(w.to) != "t2"; };
  fleet.world.run_for(1500ms, 250ms, lossy);
  EXPECT_EQ(fleet.source->agent->operations().find_workload("default", "job")->phase,
            model::Phase::kPlacing);
  // The next batch answers; its READYs wait preferredWait (1s) for t1, the
  // first-ranked, which never answers.
  fleet.world.run_for(2500ms, 250ms, lossy);
  auto record = fleet.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_TRUE(record->cluster == "t3" || record->cluster == "t4") << record->cluster;
}

TEST(DispatcherTest, AllAtOnceAsksEveryEligibleTarget) {
  Fleet fleet;
  ASSERT_TRUE(fleet.source->agent->operations().submit({workload("job", 1000, 60s)}).is_ok());
  EXPECT_EQ(distinct(fleet.run_asking(1s)).size(), 5u);
}

model::WorkloadSpec preferred_job() {
  model::WorkloadSpec spec = workload("job", 1000, 60s);
  spec.placement.dispatcher = model::Dispatcher::kPreferred;
  return spec;
}

TEST(DispatcherTest, PreferredAsksTheFirstRankedAloneAndItWins) {
  Fleet fleet;
  ASSERT_TRUE(fleet.source->agent->operations().submit({preferred_job()}).is_ok());
  int cancels = 0;
  std::vector<std::string> asked = fleet.run_asking(2s, [&](const Wire& w) {
    cancels += w.type == MessageType::kCancel;
    return true;
  });
  ASSERT_EQ(asked.size(), 1u) << "nobody else reserves room for it";
  EXPECT_TRUE(asked[0] == "t1" || asked[0] == "t2") << asked[0] << ": not one of the roomiest";
  EXPECT_EQ(cancels, 0) << "nothing to release";
  auto record = fleet.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_EQ(record->cluster, asked[0]);
}

TEST(DispatcherTest, PreferredAsksEveryOtherTargetAtOnceWhenTheFirstRankedRejects) {
  // The gpu job's node selector matches no node of t1 or t2, which only
  // they know (node labels never leave a cluster): the first-ranked refuses.
  Fleet fleet;
  ASSERT_TRUE(
      fleet.source->agent->operations().submit({gpu_job(model::Dispatcher::kPreferred)}).is_ok());
  std::vector<std::string> asked = fleet.run_asking(2s);
  ASSERT_EQ(asked.size(), 5u);
  EXPECT_TRUE(asked[0] == "t1" || asked[0] == "t2") << asked[0];
  EXPECT_EQ(distinct(asked), (std::set<std::string>{"t1", "t2", "t3", "t4", "t5"}));
  auto record = fleet.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_TRUE(record->cluster == "t3" || record->cluster == "t4" || record->cluster == "t5")
      << record->cluster;
}

TEST(DispatcherTest, PreferredAsksTheOthersAfterPreferredWaitAndTheyWaitNoLonger) {
  // t1 and t2 never answer. The others are asked once the first-ranked has
  // had preferredWait (1 s) from the round's start, and their READYs do
  // not wait for it a second time.
  Fleet fleet;
  ASSERT_TRUE(fleet.source->agent->operations().submit({preferred_job()}).is_ok());
  auto lossy = [&](const Wire& w) { return fleet.name_of(w.to) != "t1" && fleet.name_of(w.to) != "t2"; };
  EXPECT_EQ(distinct(fleet.run_asking(750ms, lossy)).size(), 1u) << "before preferredWait";
  EXPECT_EQ(fleet.source->agent->operations().find_workload("default", "job")->phase,
            model::Phase::kPlacing);
  fleet.run_asking(750ms, lossy);
  auto record = fleet.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning) << "1.5 s after it was submitted";
  EXPECT_TRUE(record->cluster == "t3" || record->cluster == "t4" || record->cluster == "t5")
      << record->cluster;
}

TEST(DispatcherTest, PreferredAsksEveryoneAtOnceForAReadyWindow) {
  Fleet fleet;
  model::WorkloadSpec spec = preferred_job();
  spec.placement.ready_window = 2s;  // compares READYs: it needs them all
  ASSERT_TRUE(fleet.source->agent->operations().submit({spec}).is_ok());
  EXPECT_EQ(distinct(fleet.run_asking(1s)).size(), 5u);
}

TEST(DispatcherTest, TheAgentsDefaultIsPreferred) {
  EXPECT_EQ(AgentConfig{}.default_dispatcher, model::Dispatcher::kPreferred);
  Fleet fleet;
  fleet.world.configure = [](AgentConfig& config) {
    config.default_dispatcher = AgentConfig{}.default_dispatcher;
  };
  fleet.world.restart(*fleet.source);
  fleet.world.run_for(3s);
  ASSERT_TRUE(fleet.source->agent->operations().submit({workload("job", 1000, 60s)}).is_ok());
  EXPECT_EQ(distinct(fleet.run_asking(2s)).size(), 1u);
  EXPECT_EQ(fleet.source->agent->operations().find_workload("default", "job")->phase,
            model::Phase::kRunning);
}

TEST(DispatcherTest, ExternalBindsOnlyAfterNominateAndRenominatingCancels) {
  Fleet fleet;
  ASSERT_TRUE(
      fleet.source->agent->operations().submit({gpu_job(model::Dispatcher::kExternal)}).is_ok());
  std::set<std::string> asked;
  auto count = [&](const Wire& w) {
    if (w.type == MessageType::kCandidate) asked.insert(fleet.name_of(w.to));
    return true;
  };
  fleet.world.run_for(2s, 250ms, count);
  EXPECT_TRUE(asked.empty());
  EXPECT_NE(reason_of(*fleet.source, "job").find("waiting for nominations"), std::string::npos)
      << reason_of(*fleet.source, "job");
  // Nominate t3, which never answers; then renominate t4: t3 is cancelled.
  ASSERT_TRUE(fleet.source->agent->operations().nominate("default", "job", {"t3"}).is_ok());
  bool cancelled_t3 = false;
  auto t3_silent = [&](const Wire& w) {
    count(w);
    cancelled_t3 |= w.type == MessageType::kCancel && fleet.name_of(w.to) == "t3";
    return fleet.name_of(w.to) != "t3" && fleet.name_of(w.from) != "t3";
  };
  fleet.world.run_for(1s, 250ms, t3_silent);
  EXPECT_EQ(phase_of(*fleet.source, "job"), model::Phase::kPlacing);
  ASSERT_TRUE(fleet.source->agent->operations().nominate("default", "job", {"t4"}).is_ok());
  fleet.world.run_for(2s, 250ms, t3_silent);
  EXPECT_TRUE(cancelled_t3);
  EXPECT_EQ(asked, (std::set<std::string>{"t3", "t4"}));
  auto record = fleet.source->agent->operations().find_workload("default", "job");
  EXPECT_EQ(record->phase, model::Phase::kRunning);
  EXPECT_EQ(record->cluster, "t4");
  // Bound: the nominations are immutable.
  Status again = fleet.source->agent->operations().nominate("default", "job", {"t5"});
  EXPECT_EQ(again.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(again.message().find("already bound at t4"), std::string::npos) << again.message();
  // Nominating a workload of another dispatcher is refused.
  ASSERT_TRUE(fleet.source->agent->operations().submit({workload("plain", 1000)}).is_ok());
  EXPECT_EQ(fleet.source->agent->operations().nominate("default", "plain", {"t1"}).code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace shoal::core::testing
