// What a simulation runs, drawn from one seed: the clusters and
// organizations, who invites whom, the workload trace (Poisson arrivals,
// lognormal durations, a mix of sizes and namespaces) and the fault
// schedule. The same Scenario is fed to the federation and to the ideal
// central scheduler, so their results compare job for job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/time.h"
#include "crypto/invitation.h"
#include "model/manifest.h"
#include "model/quota.h"
#include "model/workload.h"
#include "tests/sim/network.h"

namespace shoal::sim {

enum class Graph {
  kFullMesh,  // every agent invites every other
  kRandom,    // each agent is invited by `invited_by` others, drawn at random
  kOrgs,      // full mesh inside an organization; across organizations each
              // agent invites two agents of other organizations into the
              // first namespace only, with a cpu limit
};
std::optional<Graph> graph_from_name(const std::string& name);
std::string graph_name(Graph graph);

struct ScenarioOptions {
  uint64_t seed = 1;
  int agents = 20;
  int nodes = 4;  // per agent
  int64_t node_cpu_milli = 16'000;
  Graph graph = Graph::kRandom;
  int invited_by = 4;
  int orgs = 4;
  int namespaces = 3;  // ns-0 .. ns-(n-1), equal weights
  int workloads = 200;
  Duration arrivals = std::chrono::minutes(2);  // arrivals spread over this window
  // Mean run time; 0 derives it from `load` (offered cpu / capacity).
  Duration mean_duration{0};
  double load = 0.8;
  double duration_sigma = 1.0;  // lognormal shape
  // Faults (crashes, pauses, partitions, one-way cuts, lossy links) over
  // the arrival window; everything heals at its end.
  bool faults = false;
  // With faults: disks that fail for a while too (Fault::kStoreFault).
  bool store_faults = true;
  Duration max_clock_skew{0};
  // Lifecycle timers in seconds instead of minutes (lease 2 s, worker lost
  // 6 s...), so that faults run their course within a short simulation.
  bool fast_timers = false;
  std::optional<model::Dispatcher> dispatcher;  // unset: the agents' default
  Duration ready_window{0};
  // Priorities and preemption: every cluster stops lower-priority work
  // within a queue; a fifth of the jobs have priority 100, the rest 0;
  // each invitation is preemptible or not, with a priority ceiling of 50.
  bool preemption = false;
  // > 0: every agent holds namespace ns-0 to this much cpu across the
  // federation (a federation-wide quota).
  int64_t quota_cpu_milli = 0;
  // Group commit as shoald runs it (FederationOptions::group_commit);
  // unset: on for odd seeds, so that any sweep runs both ways.
  std::optional<bool> group_commit;
};

inline bool group_commit_on(const ScenarioOptions& options) {
  return options.group_commit.value_or(options.seed % 2 == 1);
}

struct TraceJob {
  Duration arrival;  // after the simulation's start
  uint32_t source;   // the agent it is submitted to
  model::WorkloadSpec spec;
};

struct Fault {
  // kEvict: the agent's operator deletes one copy it runs for another
  // agent (DeletedAtTarget), an end the job did not cause.
  // kStoreFault: the agent's disk refuses every write (or, with
  // `at_commit`, every commit) for `length`; the agent turns read-only.
  enum class Kind { kCrash, kCrashInStep, kFreeze, kPartition, kCut, kLossyLinks, kEvict, kStoreFault };
  Duration at;
  Kind kind;
  uint32_t agent = 0;          // crash, freeze, evict; cut: from
  uint32_t other = 0;          // cut: to
  Duration length{0};          // down, frozen, cut, partitioned or lossy this long
  std::vector<uint32_t> side;  // partition: one side
  LinkFaults link;             // lossy links
  bool at_commit = false;      // store fault: the commit fails, not the writes
};
std::string describe(const Fault& fault);

struct Invite {
  uint32_t target;
  uint32_t source;
  std::vector<std::string> namespaces;
  crypto::InvitationLimits limits;
};

struct Scenario {
  ScenarioOptions options;
  std::vector<model::ClusterSpec> clusters;  // one per agent
  std::vector<uint32_t> org_of;
  std::vector<Invite> invites;
  std::vector<TraceJob> trace;                 // by arrival
  std::vector<Fault> faults;                   // by time
  std::vector<model::QuotaSpec> quotas;        // set at every agent, as a source
  Duration mean_duration{0};                   // as used
  Duration warmup = std::chrono::seconds(10);  // invitations settle before the first arrival
  int64_t total_cpu_milli() const;
};

Scenario make_scenario(const ScenarioOptions& options);

}  // namespace shoal::sim
