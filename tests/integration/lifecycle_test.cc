// The remote lifecycle's acceptance scenarios with real shoald
// processes: a target frozen with SIGSTOP before READY and after bind
// (worker lost under lease fencing), an operator's delete at the target
// under both restart policies, exit codes mirrored, the External
// dispatcher driven by `shoalctl nominate`, a target restarted while it
// runs a copy, a peer that goes Unreachable and comes back within the
// lease, and a source restarted while its winner is silent.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "common/time.h"
#include "harness.h"
#include "store/sqlite/sqlite_store.h"
#include "tests/chaos/checker.h"

namespace shoal::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class Lifecycle : public ::testing::Test {
 protected:
  virtual std::string lease() const { return "1s"; }
  virtual std::string worker_lost_timeout() const { return "3s"; }

  void SetUp() override {
    // The source's own cluster is too small for the test workloads.
    std::string tiny = dir_.path() + "/tiny.yaml";
    std::ofstream(tiny) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: source}\n"
                           "spec:\n  nodes:\n  - {name: n, count: 1, capacity: {cpu: 100m, memory: 1Gi}}\n";
    source_.init({"--cluster-config", tiny});
    // East has the default 4 x 8 cpu, west is smaller and alone has nodes
    // labelled pool=special. Both idle, they score the same (the share left
    // free), and east ranks first by name.
    std::string special = dir_.path() + "/west.yaml";
    std::ofstream(special) << "apiVersion: shoal.dev/v1\nkind: Cluster\nmetadata: {name: west}\nspec:\n"
                              "  nodes:\n  - {name: n, count: 2, capacity: {cpu: \"8\", memory: 32Gi}, "
                              "labels: {pool: special}}\n";
    east_.init();
    west_.init({"--cluster-config", special});
    for (AgentProcess* agent : {&source_, &east_, &west_}) {
      // Fencing in seconds: renewals every 250ms, a copy stops 1s after its
      // source went quiet, the source re-places after 3s.
      agent->set_config("lease", lease());
      agent->set_config("maxClockSkew", "200ms");
      agent->set_config("workerLostTimeout", worker_lost_timeout());
      agent->set_config("gcInterval", "1s");
      agent->set_config("heartbeatInterval", "300ms");
      agent->set_config("pendingRetry", "500ms");
      agent->set_config("pendingRetryMax", "2s");
      agent->set_log_level("debug");  // workload events are logged at debug
      ASSERT_TRUE(agent->start()) << agent->name();
    }
    for (AgentProcess* target : {&east_, &west_}) {
      CommandResult token =
          target->ctl({"invite", "create", "--to", source_.identity(), "--namespace", "default"});
      ASSERT_EQ(token.exit_code, 0) << token.err;
      CommandResult accepted = source_.ctl({"invite", "accept", token.out.substr(0, token.out.find('\n'))});
      ASSERT_EQ(accepted.exit_code, 0) << accepted.err;
    }
    ASSERT_TRUE(wait_until([&] { return advertising_targets() == 2; }, 20s));
  }

  int advertising_targets() {
    json peers = source_.ctl_json({"peers"});
    int count = 0;
    if (peers.is_null()) return 0;
    for (const auto& p : peers["items"]) count += p["state"] == "Active" && !p["capacity"].empty();
    return count;
  }

  // Submits one workload whose spec (a YAML flow mapping body) is `spec`.
  void submit(const std::string& name, const std::string& spec) {
    std::string path = dir_.path() + "/" + name + ".yaml";
    std::ofstream(path) << "apiVersion: shoal.dev/v1\nkind: Workload\nmetadata: {name: " << name
                        << ", namespace: default}\nspec: {resources: {cpu: \"1\", memory: 1Gi}, "
                        << spec << "}\n";
    CommandResult result = source_.ctl({"submit", "-f", path});
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }

  json describe(const std::string& name) {
    return source_.ctl_json({"describe", "workload", "default/" + name});
  }

  bool status_is(const std::string& name, const std::string& phase, const std::string& cluster = "") {
    json w = describe(name);
    return !w.is_null() && w["status"]["phase"] == phase &&
           (cluster.empty() || w["status"]["cluster"] == cluster);
  }

  bool has_event(const std::string& name, const std::string& text) {
    json w = describe(name);
    if (w.is_null()) return false;
    for (const auto& e : w["events"]) {
      if (e["text"].get<std::string>().find(text) != std::string::npos) return true;
    }
    return false;
  }

  // The copy of `uid` at `agent`, or null.
  static json copy_at(AgentProcess& agent, const std::string& uid) {
    json list = agent.ctl_json({"get", "reservations"});
    if (list.is_null()) return nullptr;
    for (const auto& r : list["items"]) {
      if (r["uid"] == uid) return r;
    }
    return nullptr;
  }

  static bool runs(AgentProcess& agent, const std::string& uid) {
    json copy = copy_at(agent, uid);
    return !copy.is_null() && (copy["phase"] == "Running" || copy["phase"] == "Bound");
  }

  AgentProcess& agent_named(const std::string& name) { return name == "east" ? east_ : west_; }

  TempDir dir_;
  AgentProcess source_{"source", dir_.path()};
  AgentProcess east_{"east", dir_.path()};
  AgentProcess west_{"west", dir_.path()};
};

TEST_F(Lifecycle, WinnerFrozenAfterBindStopsItsCopyBeforeTheSourcePlacesANewOne) {
  submit("job", "duration: 10m");
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Running"); }, 20s));
  json before = describe("job");
  std::string uid = before["metadata"]["uid"];
  std::string first = before["status"]["cluster"];
  std::string second = first == "east" ? "west" : "east";
  AgentProcess& frozen = agent_named(first);

  frozen.pause();
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Running", second); }, 30s))
      << describe("job").dump(2);
  json after = describe("job");
  EXPECT_EQ(after["status"]["disruptions"], 1);
  EXPECT_EQ(after["status"]["restarts"], 0);
  EXPECT_GT(after["status"]["epoch"].get<int>(), before["status"]["epoch"].get<int>());
  EXPECT_TRUE(has_event("job", "worker lost: " + first));
  json new_copy = copy_at(agent_named(second), uid);
  ASSERT_FALSE(new_copy.is_null());

  frozen.resume();
  // On waking, the frozen target stops its copy as of its lease's end,
  // which came before the new copy started.
  std::string marker = "the lease of source ended at ";
  ASSERT_TRUE(wait_until([&] { return frozen.log().find(marker) != std::string::npos; }, 20s));
  std::string log = frozen.log();
  std::string lease_end = log.substr(log.find(marker) + marker.size(), 24);
  EXPECT_LT(lease_end, new_copy["startedAt"].get<std::string>());
  EXPECT_TRUE(wait_until([&] { return !runs(frozen, uid); }, 10s));
  // Reconciled: one copy runs, the workload stays where it was re-placed,
  // and the old copy's record is collected.
  EXPECT_TRUE(wait_until([&] { return copy_at(frozen, uid).is_null(); }, 20s));
  EXPECT_TRUE(runs(agent_named(second), uid));
  EXPECT_TRUE(status_is("job", "Running", second));
}

TEST_F(Lifecycle, TargetFrozenBeforeReadyLosesTheRaceAndHoldsNothingAfterwards) {
  west_.pause();
  submit("job", "duration: 10m");
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Running", "east"); }, 20s));
  std::string uid = describe("job")["metadata"]["uid"];
  west_.resume();
  // West wakes to the stale CANDIDATE, may reserve and answer READY; the
  // source cancels it. Nothing stays held at west.
  ASSERT_TRUE(wait_until([&] { return west_.ctl({"status"}).exit_code == 0; }, 20s));
  EXPECT_TRUE(wait_until([&] { return copy_at(west_, uid).is_null(); }, 20s));
  EXPECT_TRUE(status_is("job", "Running", "east"));
  EXPECT_TRUE(runs(east_, uid));
}

// A delete at the target is not the job's own failure: placed again under
// either restartPolicy, and not at that target for a while.
TEST_F(Lifecycle, OperatorDeleteAtTheTargetIsMirroredAndPlacedAgainElsewhere) {
  submit("again", "duration: 10m, restartPolicy: OnFailure");
  submit("once", "duration: 10m, placement: {clusters: [east]}");
  ASSERT_TRUE(wait_until([&] { return status_is("again", "Running") && status_is("once", "Running"); }, 20s));
  std::string where = describe("again")["status"]["cluster"];
  // The target's operator sees whose work it runs.
  json hosted = agent_named(where).ctl_json({"get", "reservations"});
  ASSERT_FALSE(hosted["items"].empty());
  EXPECT_EQ(hosted["items"][0]["sourceCluster"], "source");
  CommandResult stopped = agent_named(where).ctl({"delete", "workload", "default/again"});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_NE(stopped.out.find("stopped here"), std::string::npos) << stopped.out;
  ASSERT_TRUE(wait_until([&] { return has_event("again", "Failed at " + where + ": DeletedAtTarget"); }, 20s));
  std::string elsewhere = where == "east" ? "west" : "east";
  ASSERT_TRUE(wait_until([&] { return status_is("again", "Running", elsewhere); }, 20s))
      << describe("again").dump(2);
  EXPECT_EQ(describe("again")["status"]["disruptions"], 1);
  EXPECT_EQ(describe("again")["status"]["restarts"], 0);

  CommandResult unknown = east_.ctl({"delete", "workload", "default/nope"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("not found"), std::string::npos) << unknown.err;
  // Under restartPolicy Never too; east is its only allowed cluster, and
  // east just deleted it: it waits rather than go back there at once.
  ASSERT_EQ(east_.ctl({"delete", "workload", "default/once", "--from", "source"}).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return has_event("once", "Failed at east: DeletedAtTarget"); }, 20s));
  ASSERT_TRUE(wait_until([&] { return status_is("once", "Pending"); }, 20s)) << describe("once").dump(2);
  json once = describe("once");
  EXPECT_EQ(once["status"]["disruptions"], 1) << once.dump(2);
  EXPECT_EQ(once["status"]["restarts"], 0);
  EXPECT_TRUE(wait_until([&] {
    return describe("once")["status"]["reason"].get<std::string>().find("east=DisruptedItRecently") !=
           std::string::npos;
  }, 20s)) << describe("once").dump(2);
}

TEST_F(Lifecycle, SuccessAndExitCodesAreMirrored) {
  submit("good", "duration: 1s");
  submit("bad", "duration: 1s, exitCode: 3");
  ASSERT_TRUE(wait_until([&] { return status_is("good", "Succeeded") && status_is("bad", "Failed"); }, 30s));
  json good = describe("good");
  json bad = describe("bad");
  EXPECT_EQ(good["status"]["exitCode"], 0);
  EXPECT_EQ(bad["status"]["exitCode"], 3);
  EXPECT_NE(bad["status"]["finishedAt"], "");
  EXPECT_LT(bad["status"]["startedAt"].get<std::string>(), bad["status"]["finishedAt"].get<std::string>());
  EXPECT_FALSE(bad["status"]["nodes"].empty()) << "per-copy node placement";
}

TEST_F(Lifecycle, ExternalDispatcherBindsOnlyAfterNominate) {
  submit("picked", "duration: 10m, placement: {dispatcher: External}");
  ASSERT_TRUE(wait_until([&] { return has_event("picked", "pending: "); }, 20s));
  EXPECT_TRUE(status_is("picked", "Pending"));
  EXPECT_NE(describe("picked")["status"]["reason"].get<std::string>().find("waiting for nominations"),
            std::string::npos);
  CommandResult nominated = source_.ctl({"nominate", "default/picked", "--clusters", "west"});
  ASSERT_EQ(nominated.exit_code, 0) << nominated.err;
  ASSERT_TRUE(wait_until([&] { return status_is("picked", "Running", "west"); }, 20s));
  CommandResult again = source_.ctl({"nominate", "default/picked", "--clusters", "east"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("already bound"), std::string::npos) << again.err;
}

TEST_F(Lifecycle, IncrementalAsksTheNextBatchWhenTheFirstAllRejects) {
  submit("picky", "duration: 10m, nodeSelector: {pool: special}, "
                  "placement: {dispatcher: Incremental, incrementalBatch: 1, roundTimeout: 5m}");
  ASSERT_TRUE(wait_until([&] { return status_is("picky", "Running", "west"); }, 20s))
      << describe("picky").dump(2);
  EXPECT_TRUE(has_event("picky", "epoch 1: candidates east (1 more later)"));
  EXPECT_TRUE(has_event("picky", "east rejected: "));
  EXPECT_TRUE(has_event("picky", "epoch 1: more candidates west"));
  EXPECT_EQ(describe("picky")["status"]["epoch"], 1) << "one round, two batches";
}

TEST_F(Lifecycle, SampleContactsOnlyTheBestDTimesN) {
  submit("sampled", "duration: 10m, placement: {dispatcher: Sample, sampleFactor: 1}");
  ASSERT_TRUE(wait_until([&] { return status_is("sampled", "Running", "east"); }, 20s));
  EXPECT_TRUE(has_event("sampled", "epoch 1: candidates east; ranked east 100, west 100"))
      << "west is ranked, but the sample of 1 asks only east";
  EXPECT_FALSE(has_event("sampled", "west rejected")) << describe("sampled").dump(2);
}

TEST_F(Lifecycle, TargetRestartedWhileRunningACopyFinishesItOnce) {
  submit("job", "duration: 6s, placement: {clusters: [east]}");
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Running", "east"); }, 20s));
  east_.kill_hard();
  ASSERT_TRUE(east_.start());
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Succeeded", "east"); }, 30s))
      << describe("job").dump(2);
  json job = describe("job");
  EXPECT_EQ(job["status"]["restarts"], 0) << "restored, not re-placed";
  EXPECT_EQ(job["status"]["disruptions"], 0) << "restored, not re-placed";
  EXPECT_EQ(job["status"]["epoch"], 1);
}

TEST_F(Lifecycle, TwoCopiesRunOnTwoClustersAndDescribeShowsEach) {
  submit("pair", "duration: 10m, placement: {numberOfClusters: 2}");
  ASSERT_TRUE(wait_until([&] { return status_is("pair", "Running"); }, 20s)) << describe("pair").dump(2);
  json pair = describe("pair");
  EXPECT_EQ(pair["status"]["reason"], "2/2 running");
  ASSERT_EQ(pair["status"]["copies"].size(), 2u);
  std::set<std::string> clusters;
  for (const auto& copy : pair["status"]["copies"]) {
    EXPECT_EQ(copy["phase"], "Running");
    clusters.insert(copy["cluster"].get<std::string>());
  }
  EXPECT_EQ(clusters, (std::set<std::string>{"east", "west"}));
  CommandResult text = source_.ctl({"describe", "workload", "default/pair"});
  EXPECT_NE(text.out.find("Copies:"), std::string::npos) << text.out;
  json list = source_.ctl_json({"get", "workloads"});
  EXPECT_EQ(list["items"].size(), 1u) << "one workload, two copies";
  // Each target shows the lease the source keeps renewing.
  json peer = east_.ctl_json({"describe", "peer", "source"});
  ASSERT_FALSE(peer.is_null());
  EXPECT_NE(peer["leaseUntil"], "");
  EXPECT_NE(east_.ctl({"describe", "peer", "source"}).out.find("may run until"), std::string::npos);
}

TEST(LifecycleConfig, UnsoundFencingTimersAreRefusedAtStartWithOneLine) {
  TempDir dir;
  AgentProcess agent("solo", dir.path());
  agent.init();
  agent.set_config("lease", "2m");
  agent.set_config("workerLostTimeout", "1m");
  CommandResult run = run_command({bin_path("shoald"), "run", "--data", agent.data_dir()}, 20s);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("agent.yaml workerLostTimeout: expected more than lease + maxClockSkew"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

}  // namespace
}  // namespace shoal::testing

namespace shoal::testing {
namespace {

// Fencing slow enough for an outage to heal before it bites: peers turn
// Unreachable after three heartbeats (0.9 s), copies outlive 5 s of silence
// and the source gives a silent winner up after 10 s.
class ConnectionLoss : public Lifecycle {
 protected:
  std::string lease() const override { return "5s"; }
  std::string worker_lost_timeout() const override { return "10s"; }

  std::string peer_state(const std::string& cluster) {
    json peers = source_.ctl_json({"peers"});
    if (peers.is_null()) return "";
    for (const auto& p : peers["items"]) {
      if (p["cluster"] == cluster) return p["state"];
    }
    return "";
  }
};

TEST_F(ConnectionLoss, APeerThatGoesUnreachableAndComesBackIsActiveAndItsCopyRunsOn) {
  submit("job", "duration: 10m");
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Running"); }, 20s));
  json before = describe("job");
  std::string where = before["status"]["cluster"];
  AgentProcess& target = agent_named(where);
  target.pause();
  EXPECT_TRUE(wait_until([&] { return peer_state(where) == "Unreachable"; }, 10s)) << peer_state(where);
  target.resume();
  EXPECT_TRUE(wait_until([&] { return peer_state(where) == "Active"; }, 10s)) << peer_state(where);
  // The outage healed within the lease: the same copy runs on, never
  // counted as a restart or a disruption.
  json after = describe("job");
  EXPECT_EQ(after["status"]["phase"], "Running");
  EXPECT_EQ(after["status"]["cluster"], where);
  EXPECT_EQ(after["status"]["epoch"], before["status"]["epoch"]);
  EXPECT_EQ(after["status"]["restarts"], 0);
  EXPECT_EQ(after["status"]["disruptions"], 0);
  EXPECT_FALSE(has_event("job", "worker lost"));
}

// A target killed for good holds a delete hostage: the workload stays
// Deleting. `delete --force` (after confirming) ends it at once and frees
// the name; the dead target cannot run the copy, and an unreachable one
// would stop it when the lease lapsed.
TEST_F(ConnectionLoss, ForcedDeleteEndsAWorkloadWhoseTargetIsGoneForGood) {
  submit("job", "duration: 10m, placement: {clusters: [east]}");
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Running", "east"); }, 20s));
  east_.kill_hard();
  ASSERT_TRUE(wait_until([&] { return peer_state("east") == "Unreachable"; }, 10s));
  ASSERT_EQ(source_.ctl({"delete", "workload", "default/job"}).exit_code, 0);
  ASSERT_EQ(describe("job")["status"]["reason"], "Deleting");

  // Asked first: with nothing on stdin to say yes, nothing is deleted.
  CommandResult unconfirmed = source_.ctl({"delete", "workload", "default/job", "--force"});
  EXPECT_EQ(unconfirmed.exit_code, 1);
  EXPECT_NE(unconfirmed.err.find("by force?"), std::string::npos) << unconfirmed.err;
  EXPECT_NE(unconfirmed.err.find("not deleted"), std::string::npos) << unconfirmed.err;
  ASSERT_FALSE(describe("job").is_null());
  CommandResult with_from =
      source_.ctl({"delete", "workload", "default/job", "--force", "--yes", "--from", "x"});
  EXPECT_EQ(with_from.exit_code, 2);
  EXPECT_NE(with_from.err.find("--force: not with --from"), std::string::npos) << with_from.err;

  // Answered yes on stdin, as a script would.
  CommandResult forced =
      run_command({"/bin/sh", "-c",
                   "echo y | '" + bin_path("shoalctl") + "' --data '" + source_.data_dir() +
                       "' delete workload default/job --force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("deleted by force"), std::string::npos) << forced.out;
  CommandResult gone = source_.ctl({"describe", "workload", "default/job"});
  EXPECT_EQ(gone.exit_code, 2) << "forgotten at once, not after east answers";
  CommandResult again = source_.ctl({"delete", "workload", "default/job", "--force", "--yes"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("not found"), std::string::npos) << again.err;
  submit("job", "duration: 1s");
  EXPECT_TRUE(wait_until([&] { return status_is("job", "Succeeded", "west"); }, 30s))
      << describe("job").dump(2);
}

// A target killed for good holds its copies hostage until workerLostTimeout.
// `peer forget` (after confirming) lets it go at once: no longer listed,
// its copy placed again once the lease renewed until the forget has ended,
// and not sooner. When the dead cluster comes back anyway it is not heard,
// and the chaos checker, reading every agent's durable records, finds the
// job ran once at a time.
TEST_F(ConnectionLoss, AForgottenPeersCopyIsPlacedAgainAfterItsLeaseAndNeverTwiceAtOnce) {
  submit("job", "duration: 8s");  // longer than east's lease: only the fence ends it there
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Running", "east"); }, 20s));
  std::string east_id = east_.ctl_json({"status"}).value("id", "");
  east_.kill_hard();
  ASSERT_TRUE(wait_until([&] { return peer_state("east") == "Unreachable"; }, 10s));

  CommandResult unconfirmed = source_.ctl({"peer", "forget", "east"});
  EXPECT_EQ(unconfirmed.exit_code, 1);
  EXPECT_NE(unconfirmed.err.find("not forgotten"), std::string::npos) << unconfirmed.err;
  EXPECT_EQ(peer_state("east"), "Unreachable") << "still a peer";
  CommandResult unknown = source_.ctl({"peer", "forget", "north", "--yes"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("name: no peer north"), std::string::npos) << unknown.err;

  CommandResult forgotten = source_.ctl({"peer", "forget", "east", "--yes"});
  ASSERT_EQ(forgotten.exit_code, 0) << forgotten.err;
  EXPECT_NE(forgotten.out.find("peer east forgotten: 1 invitation(s) revoked"), std::string::npos)
      << forgotten.out;
  std::string marker = "placed again from ";
  size_t at = forgotten.out.find(marker);
  ASSERT_NE(at, std::string::npos) << forgotten.out;
  auto placed_again_at = parse_time(
      forgotten.out.substr(at + marker.size(), forgotten.out.find('\n', at) - at - marker.size()),
      "placedAgainAt");
  ASSERT_TRUE(placed_again_at.is_ok()) << forgotten.out;
  EXPECT_EQ(peer_state("east"), "") << "no longer listed";

  ASSERT_TRUE(wait_until([&] { return status_is("job", "Succeeded", "west"); }, 30s))
      << describe("job").dump(2);
  EXPECT_TRUE(has_event("job", "east forgotten by the operator"));
  std::string uid = describe("job")["metadata"]["uid"];
  auto west_store = store::sqlite::SqliteStore::open(west_.data_dir() + "/state.db");
  ASSERT_TRUE(west_store.is_ok());
  auto west_runs = (*west_store)->load_runs();
  ASSERT_TRUE(west_runs.is_ok());
  ASSERT_EQ(west_runs->size(), 1u);
  EXPECT_EQ(west_runs->front().uid, uid);
  EXPECT_GE(west_runs->front().started_at_ms, to_millis(*placed_again_at))
      << "placed again before the lease renewed until the forget had ended";

  // The dead cluster comes back: it fences its copy as of the lapse, and
  // the source does not hear it.
  ASSERT_TRUE(east_.start());
  ASSERT_TRUE(wait_until(
      [&] {
        return east_.log().find("stopped at east: the lease of source ended") != std::string::npos;
      },
      20s))
      << east_.log();
  EXPECT_EQ(peer_state("east"), "");
  EXPECT_EQ(describe("job")["status"]["cluster"], "west");

  std::vector<chaos::AgentRecords> records;
  chaos::Expectations expected;
  for (AgentProcess* agent : {&source_, &east_, &west_}) {
    std::string id = agent->ctl_json({"status"}).value("id", "");
    agent->stop();
    auto loaded = chaos::load_records(agent->name(), id, agent->data_dir() + "/state.db");
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
    records.push_back(std::move(loaded).value());
    if (agent == &source_) expected.submitted[id] = {"job"};
  }
  EXPECT_EQ(records[1].id, east_id);
  expected.node_capacity = {8000, int64_t{32} << 30, 0};
  for (const chaos::Finding& finding : chaos::check(records, expected)) {
    ADD_FAILURE() << finding.invariant << ": " << finding.detail;
  }
}

// A source restarted while its winner is silent counts workerLostTimeout
// from its own start: it cannot know how long the winner was silent while
// it was down, and giving up early could run the work twice.
TEST_F(Lifecycle, ARestartedSourceCountsWorkerLostTimeoutAfresh) {
  submit("job", "duration: 10m");
  ASSERT_TRUE(wait_until([&] { return status_is("job", "Running"); }, 20s));
  std::string where = describe("job")["status"]["cluster"];
  agent_named(where).pause();
  std::this_thread::sleep_for(2s);  // the fault being tested: silence before the restart
  source_.kill_hard();
  auto restarted_at = std::chrono::system_clock::now();  // before its first tick, surely
  ASSERT_TRUE(source_.start());
  ASSERT_TRUE(wait_until([&] { return has_event("job", "worker lost: " + where); }, 30s))
      << describe("job").dump(2);
  std::string given_up_at;
  json described = describe("job");
  for (const auto& e : described["events"]) {
    if (e["text"].get<std::string>().find("worker lost: " + where) != std::string::npos) given_up_at = e["at"];
  }
  auto given_up = parse_time(given_up_at, "at");
  ASSERT_TRUE(given_up.is_ok()) << given_up_at << ": " << given_up.status().message();
  // Not 1 s after the restart (3 s after the silence began), but 3 s after
  // it: a lower bound, which a slow machine only makes later.
  EXPECT_GE(std::chrono::duration_cast<std::chrono::milliseconds>(*given_up - restarted_at).count(), 2900)
      << "given up " << given_up_at;
  agent_named(where).resume();
}

// `shoalctl patch workload --priority` on work queued at its target: the
// target serves the queue in the new order. The work may run only at west
// (spec.placement.clusters), where a blocker holds every cpu.
TEST_F(Lifecycle, PatchingAQueuedWorkloadsPriorityLetsItRunFirstAtItsTarget) {
  const std::string special = "placement: {clusters: [west]}, ";
  submit("blocker", special + "replicas: 16, duration: 12s");  // 16 x 1 cpu: all of west
  ASSERT_TRUE(wait_until([&] { return status_is("blocker", "Running", "west"); }, 20s)) << describe("blocker").dump(2);
  // Each needs all of west too: only one can follow the blocker.
  submit("first", special + "replicas: 16, duration: 3s");
  submit("second", special + "replicas: 16, duration: 3s");
  auto queued_at_west = [&](const std::string& name) {
    json w = describe(name);
    return !w.is_null() && w["status"]["phase"] == "Pending" &&
           w["status"].value("reason", "").find("west=NoCapacity") != std::string::npos;
  };
  ASSERT_TRUE(wait_until([&] { return queued_at_west("first") && queued_at_west("second"); }, 20s))
      << describe("second").dump(2);
  CommandResult patched = source_.ctl({"patch", "workload", "default/second", "--priority", "10"});
  ASSERT_EQ(patched.exit_code, 0) << patched.err;
  json described = describe("second");
  EXPECT_EQ(described["spec"]["priority"], 10) << described.dump(2);
  EXPECT_TRUE(has_event("second", "priority 10 (was 0)"));
  // Once the blocker ends, the higher priority runs first, though it came later.
  ASSERT_TRUE(wait_until([&] { return status_is("second", "Running", "west") || status_is("first", "Running"); }, 30s));
  EXPECT_TRUE(status_is("second", "Running", "west")) << describe("first").dump(2);
  EXPECT_FALSE(status_is("first", "Running"));

  // Everything else is fixed at submit: refused, naming the field.
  CommandResult refused =
      source_.ctl({"patch", "workload", "default/first", "-p", R"({"spec": {"replicas": 3}})"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("spec.replicas cannot change after submit"), std::string::npos) << refused.err;
  refused = source_.ctl({"patch", "workload", "default/first", "-p", R"({"spec": {"priority": "high"}})"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("spec.priority: expected a whole number"), std::string::npos) << refused.err;
  ASSERT_TRUE(wait_until([&] { return status_is("blocker", "Succeeded"); }, 20s));
  refused = source_.ctl({"patch", "workload", "default/blocker", "--priority", "1"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("is Succeeded"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace shoal::testing
