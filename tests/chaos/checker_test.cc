// The chaos checker must catch each broken invariant: records built by hand,
// one defect at a time, against a clean baseline that passes.
#include <gtest/gtest.h>

#include "tests/chaos/checker.h"

namespace shoal::chaos {
namespace {

store::RunRecord run(const std::string& source, const std::string& uid, uint64_t epoch,
                     int64_t start, int64_t end, const std::string& phase,
                     int64_t cpu = 1000, std::string node = "n-0") {
  store::RunRecord r;
  r.source = source;
  r.uid = uid;
  r.epoch = epoch;
  r.name = uid;
  r.namespace_name = "default";
  r.per_replica = {cpu, 1 << 30, 0};
  r.nodes = {std::move(node)};
  r.started_at_ms = start;
  r.finished_at_ms = end;
  r.phase = phase;
  return r;
}

store::WorkloadRecord workload(const std::string& uid, model::Phase phase,
                               const std::string& parent = "", int copy = 0) {
  store::WorkloadRecord w;
  w.uid = uid;
  w.spec.name = uid;
  w.phase = phase;
  w.parent = parent;
  w.copy_index = copy;
  return w;
}

class CheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_.cluster = "c0";
    source_.id = "S";
    target_a_.cluster = "c1";
    target_a_.id = "A";
    target_b_.cluster = "c2";
    target_b_.id = "B";
    // w1 lost at c1 (lease expired at 5000), placed again at c2 afterwards.
    source_.workloads.push_back(workload("w1", model::Phase::kSucceeded));
    target_a_.runs.push_back(run("S", "w1", 1, 1000, 5000, "Failed"));
    target_b_.runs.push_back(run("S", "w1", 2, 9000, 12000, "Succeeded"));
    expected_.submitted["S"] = {"w1"};
    expected_.node_capacity = {4000, int64_t{16} << 30, 0};
    expected_.invitation_cpu_milli = 3000;
  }

  std::vector<Finding> findings() { return check({source_, target_a_, target_b_}, expected_); }
  static bool has(const std::vector<Finding>& found, const std::string& invariant) {
    for (const auto& f : found) {
      if (f.invariant == invariant) return true;
    }
    return false;
  }

  AgentRecords source_, target_a_, target_b_;
  Expectations expected_;
};

TEST_F(CheckerTest, CleanRecordsPass) { EXPECT_TRUE(findings().empty()); }

TEST_F(CheckerTest, OverlappingRunsOfOneCopyAreCaught) {
  target_a_.runs[0].finished_at_ms = 9500;  // the old copy outlived the new one's start
  EXPECT_TRUE(has(findings(), "exactly-once"));
}

TEST_F(CheckerTest, ASecondSuccessOneAfterTheOtherIsCountedNotReported) {
  target_a_.runs[0].phase = "Succeeded";
  int repeated = 0;
  EXPECT_TRUE(check({source_, target_a_, target_b_}, expected_, &repeated).empty());
  EXPECT_EQ(repeated, 1);
}

TEST_F(CheckerTest, ARunStillHoldingItsNodesIsCaught) {
  target_a_.runs.push_back(run("S", "w9", 1, 20000, 0, "Running"));
  EXPECT_TRUE(has(findings(), "exactly-once"));
}

TEST_F(CheckerTest, SucceededWithoutASuccessfulRunIsCaught) {
  target_b_.runs.clear();
  EXPECT_TRUE(has(findings(), "exactly-once"));
}

TEST_F(CheckerTest, AnOverCommittedNodeIsCaught) {
  target_b_.runs.push_back(run("X", "big", 1, 10000, 11000, "Succeeded", 3500));
  EXPECT_TRUE(has(findings(), "node capacity"));
}

TEST_F(CheckerTest, ExceedingAnInvitationLimitIsCaught) {
  target_b_.runs.push_back(run("S", "w2", 1, 10000, 11000, "Succeeded", 2500, "n-1"));
  EXPECT_TRUE(has(findings(), "invitation limit"));
  target_b_.runs.back().started_at_ms = 12000;  // after w1 released its cpu: fine
  target_b_.runs.back().finished_at_ms = 13000;
  EXPECT_FALSE(has(findings(), "invitation limit"));
}

TEST_F(CheckerTest, ASourceAboveItsFederationQuotaAcrossClustersIsCaught) {
  expected_.quota_cpu_milli = 3000;
  EXPECT_FALSE(has(findings(), "federation quota"));
  // 3 cpu at c1 while w1 holds 1 at c2: 4 of a quota of 3, though each
  // target is within its invitation's limit.
  target_a_.runs.push_back(run("S", "w2", 1, 10000, 11000, "Succeeded", 3000, "n-1"));
  EXPECT_TRUE(has(findings(), "federation quota"));
  EXPECT_FALSE(has(findings(), "invitation limit"));
}

TEST_F(CheckerTest, GroupCopiesThatSucceededOnOneClusterAreCaught) {
  source_.workloads.push_back(workload("g", model::Phase::kSucceeded));
  source_.workloads.push_back(workload("g1", model::Phase::kSucceeded, "g", 1));
  source_.workloads.push_back(workload("g2", model::Phase::kSucceeded, "g", 2));
  target_a_.runs.push_back(run("S", "g1", 1, 20000, 21000, "Succeeded", 500));
  target_b_.runs.push_back(run("S", "g2", 1, 20000, 21000, "Succeeded", 500));
  EXPECT_TRUE(findings().empty());
  target_b_.runs.pop_back();
  target_a_.runs.push_back(run("S", "g2", 2, 22000, 23000, "Succeeded", 500));
  EXPECT_TRUE(has(findings(), "group spread"));
}

TEST_F(CheckerTest, LostAndUnfinishedWorkloadsAreCaught) {
  expected_.submitted["S"].insert("w2");
  EXPECT_TRUE(has(findings(), "no loss"));
  source_.workloads.push_back(workload("w2", model::Phase::kRunning));
  auto found = findings();
  EXPECT_FALSE(has(found, "no loss"));
  EXPECT_TRUE(has(found, "terminal"));
}

TEST_F(CheckerTest, AnOutcomeItsExitCodeDoesNotExplainIsCaught) {
  // Exits 0 yet Failed: an end it did not cause, never undone.
  source_.workloads[0].phase = model::Phase::kFailed;
  source_.workloads[0].reason = "lost on the target's restart";
  EXPECT_TRUE(has(findings(), "outcome"));
  // Exits 3: Failed with 3 is right; Succeeded, or Failed with another code, is not.
  source_.workloads[0].spec.sim.exit_code = 3;
  source_.workloads[0].exit_code = 3;
  target_b_.runs.back().phase = "Failed";
  EXPECT_FALSE(has(findings(), "outcome"));
  source_.workloads[0].exit_code = 0;
  EXPECT_TRUE(has(findings(), "outcome"));
  source_.workloads[0].phase = model::Phase::kSucceeded;
  source_.workloads[0].exit_code = 3;
  EXPECT_TRUE(has(findings(), "outcome"));
}

TEST_F(CheckerTest, AFailedIntegrityCheckIsCaught) {
  target_a_.integrity = "row 3 missing from index runs_by_finish";
  EXPECT_TRUE(has(findings(), "integrity"));
}

}  // namespace
}  // namespace shoal::chaos
